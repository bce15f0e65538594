import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { HistoryDamage } from "../lib/bindings";
import HistoryDamageNotice from "./HistoryDamageNotice.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// The host's window events are not pulled here: a test calls the handlers itself.
const events = vi.hoisted(() => ({ handlers: [] as Array<() => void> }));
vi.mock("../lib/windowEvents", () => ({
  onWindowEvent: (notice: string, handler: () => void) => {
    if (notice === "historyDamaged") events.handlers.push(handler);
    return () => {};
  },
}));
const api = apiModule as unknown as ApiMock;

afterEach(() => {
  resetApi(api);
  events.handlers.length = 0;
});

const damage: HistoryDamage = {
  found: "*** in database main ***\nTree 7 page 412 cell 3: Rowid 901 out of order",
  file: "/home/ada/.local/share/conduit/history.db",
};

describe("HistoryDamageNotice", () => {
  it("shows nothing while the history is whole", async () => {
    api.historyDamage.mockResolvedValue(null);
    render(HistoryDamageNotice);
    await waitFor(() => expect(api.historyDamage).toHaveBeenCalledTimes(1));
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("shows the damage the check finds later, the file, and what the next start does", async () => {
    api.historyDamage.mockResolvedValueOnce(null).mockResolvedValueOnce(damage);
    render(HistoryDamageNotice);
    await waitFor(() => expect(api.historyDamage).toHaveBeenCalledTimes(1));
    expect(events.handlers).toHaveLength(1);
    events.handlers[0]?.();
    // As read: the template's line breaks are spaces.
    const text = (await screen.findByRole("alert")).textContent?.replace(/\s+/g, " ");
    expect(text).toContain("Your history file is damaged.");
    expect(text).toContain(damage.file);
    expect(text).toContain("Rowid 901 out of order");
    expect(text).toContain("At the next start the damaged file is moved aside");
    expect(text).toContain("Export the conversations you want to keep before you close Conduit.");

    await fireEvent.click(screen.getByRole("button", { name: "Dismiss" }));
    expect(screen.queryByRole("alert")).toBeNull();
  });

  it("shows damage found before the window opened", async () => {
    api.historyDamage.mockResolvedValue(damage);
    render(HistoryDamageNotice);
    expect((await screen.findByRole("alert")).textContent).toContain(damage.file);
  });

  it("says so when it could not ask", async () => {
    api.historyDamage.mockRejectedValue({ message: "the engine did not answer" });
    render(HistoryDamageNotice);
    expect((await screen.findByRole("alert")).textContent).toContain(
      "Whether the history is damaged could not be read: the engine did not answer",
    );
  });

  it("keeps the newest answer when an older one comes last", async () => {
    let answerFirst: (value: HistoryDamage | null) => void = () => {};
    api.historyDamage
      .mockReturnValueOnce(new Promise((resolve) => (answerFirst = resolve)))
      .mockResolvedValueOnce(damage);
    render(HistoryDamageNotice);
    events.handlers[0]?.();
    await screen.findByRole("alert");
    answerFirst(null);
    await Promise.resolve();
    expect(screen.getByRole("alert").textContent).toContain(damage.file);
  });
});
