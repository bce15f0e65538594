import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import Composer from "./Composer.svelte";

describe("Composer", () => {
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
});
