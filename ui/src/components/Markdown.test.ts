import { fireEvent, render, screen } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import Markdown from "./Markdown.svelte";

afterEach(() => {
  vi.useRealTimers();
  Reflect.deleteProperty(navigator, "clipboard");
});

describe("Markdown", () => {
  it("hands a clicked link to onOpenLink instead of navigating", async () => {
    const onOpenLink = vi.fn();
    render(Markdown, { text: "See [the docs](https://example.com/docs).", onOpenLink });
    const before = window.location.href;
    const notCancelled = await fireEvent.click(screen.getByRole("link", { name: "the docs" }));
    expect(notCancelled).toBe(false);
    expect(onOpenLink).toHaveBeenCalledExactlyOnceWith("https://example.com/docs");
    expect(window.location.href).toBe(before);
  });

  it("follows a click on text nested inside a link", async () => {
    const onOpenLink = vi.fn();
    render(Markdown, { text: "[**bold** link](https://example.com/)", onOpenLink });
    await fireEvent.click(screen.getByText("bold"));
    expect(onOpenLink).toHaveBeenCalledWith("https://example.com/");
  });

  it("copies a code block and says so for 1.5 s", async () => {
    vi.useFakeTimers();
    const writeText = vi.fn().mockResolvedValue(undefined);
    // jsdom has no clipboard.
    Object.defineProperty(navigator, "clipboard", { value: { writeText }, configurable: true });
    const onOpenLink = vi.fn();
    render(Markdown, { text: "```python\nprint('hi')\n```", onOpenLink });
    const button = screen.getByRole("button", { name: "Copy code" });
    await fireEvent.click(button);
    await vi.advanceTimersByTimeAsync(0);
    expect(writeText).toHaveBeenCalledExactlyOnceWith("print('hi')");
    expect(button.textContent).toBe("Copied");
    await vi.advanceTimersByTimeAsync(1500);
    expect(button.textContent).toBe("Copy");
    expect(onOpenLink).not.toHaveBeenCalled();
  });

  it("shows a reply nested too deep for Markdown as its text: on opening, while it streams, and after", async () => {
    const hostile = "> - ".repeat(2000) + "end";
    const opened = render(Markdown, { text: hostile, onOpenLink: vi.fn() });
    expect(opened.container.querySelector("pre.plain-text")?.textContent).toBe(hostile);
    opened.unmount();

    vi.useFakeTimers();
    const { container, rerender } = render(Markdown, { text: "Thinking", onOpenLink: vi.fn(), streaming: true });
    await rerender({ text: hostile, streaming: true });
    await vi.advanceTimersByTimeAsync(100);
    expect(container.querySelector("pre.plain-text")?.textContent).toBe(hostile);
    await rerender({ text: `${hostile}!`, streaming: false });
    expect(container.querySelector("pre.plain-text")?.textContent).toBe(`${hostile}!`);
  });
});
