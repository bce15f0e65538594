import { fireEvent, render, screen } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import SettingsView from "./SettingsView.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
const api = apiModule as unknown as ApiMock;

afterEach(() => resetApi(api));

describe("Settings", () => {
  it("keeps what was typed in a tab while another tab is looked at", async () => {
    api.listProviders.mockResolvedValue([]);
    api.detectLocalProviders.mockResolvedValue([]);
    render(SettingsView, { info: null });
    await fireEvent.click(await screen.findByRole("button", { name: "Add provider" }));
    await fireEvent.input(screen.getByLabelText("Provider id"), { target: { value: "half-typed" } });
    await fireEvent.click(screen.getByRole("tab", { name: "General" }));
    expect(screen.getByLabelText("Theme")).toBeTruthy();
    await fireEvent.click(screen.getByRole("tab", { name: "Providers" }));
    expect((screen.getByLabelText("Provider id") as HTMLInputElement).value).toBe("half-typed");
  });
});
