import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import * as api from "../lib/api";
import type { ApiMock } from "../lib/apiMock";
import Composer from "./Composer.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
const mocked = api as unknown as ApiMock;

describe("Composer", () => {
  it("offers the thinking levels beside the model and says which one is picked", async () => {
    const onThink = vi.fn();
    render(Composer, {
      disabled: false,
      onSend: vi.fn(),
      groups: [{ provider: "claude", models: ["claude-sonnet"] }],
      choice: { provider: "claude", model: "claude-sonnet" },
      thinking: "medium",
      onThink,
    });
    const list = screen.getByRole("combobox", { name: "Thinking" }) as HTMLSelectElement;
    expect([...list.options].map((o) => o.textContent)).toEqual(["Default", "Low", "Medium", "High"]);
    expect(list.value).toBe("medium");
    await fireEvent.change(list, { target: { value: "high" } });
    expect(onThink).toHaveBeenLastCalledWith("high");
    await fireEvent.change(list, { target: { value: "" } });
    expect(onThink).toHaveBeenLastCalledWith(null);
  });

  it("sends the trimmed text on Enter and clears it", async () => {
    const onSend = vi.fn();
    render(Composer, { disabled: false, onSend });
    const box = screen.getByRole("textbox", { name: "Message" }) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: "  hello  " } });
    await fireEvent.keyDown(box, { key: "Enter" });
    expect(onSend).toHaveBeenCalledWith("hello", []);
    expect(box.value).toBe("");
  });

  it("does not send on Shift+Enter", async () => {
    const onSend = vi.fn();
    render(Composer, { disabled: false, onSend });
    const box = screen.getByRole("textbox", { name: "Message" });
    await fireEvent.input(box, { target: { value: "line one" } });
    await fireEvent.keyDown(box, { key: "Enter", shiftKey: true });
    expect(onSend).not.toHaveBeenCalled();
  });

  it("sends nothing while disabled", async () => {
    const onSend = vi.fn();
    render(Composer, { disabled: true, onSend });
    const box = screen.getByRole("textbox", { name: "Message" });
    await fireEvent.input(box, { target: { value: "hello" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    expect(onSend).not.toHaveBeenCalled();
    expect((screen.getByRole("button", { name: "Send" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("keeps the text and sends nothing while a message is on its way", async () => {
    const onSend = vi.fn();
    render(Composer, { disabled: false, waiting: true, onSend });
    const box = screen.getByRole("textbox", { name: "Message" }) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: "second message" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    expect(onSend).not.toHaveBeenCalled();
    expect(box.value).toBe("second message");
    expect((screen.getByRole("button", { name: "Send" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("says why a pasted image was not attached, and nothing when the clipboard held none", async () => {
    render(Composer, { disabled: false, onSend: vi.fn() });
    const box = screen.getByRole("textbox", { name: "Message" });
    // WebKitGTK gives the page a paste of no type: the host reads the clipboard.
    const paste = () => fireEvent.paste(box, { clipboardData: { types: [], items: [], files: [] } });
    mocked.clipboardImage.mockRejectedValueOnce({ message: "no image on the clipboard: not an image" });
    await paste();
    await vi.waitFor(() => expect(mocked.clipboardImage).toHaveBeenCalledTimes(1));
    expect(screen.queryByRole("alert")).toBeNull();
    mocked.clipboardImage.mockRejectedValueOnce({ message: "the image is too large: 9000×9000 pixels" });
    await paste();
    await vi.waitFor(() =>
      expect(screen.getByRole("alert").textContent).toContain(
        "The pasted image was not attached: the image is too large: 9000×9000 pixels",
      ),
    );
    await fireEvent.click(screen.getByRole("button", { name: "Dismiss" }));
    expect(screen.queryByRole("alert")).toBeNull();
  });
});
