import { render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import { copiedText, type ViewMessage } from "../lib/turn";
import MessageView from "./MessageView.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// A renderer that fails on one reply, standing in for any bug renderMarkdown's own guards miss.
vi.mock("../lib/markdown", async (importOriginal) => {
  const real = await importOriginal<typeof import("../lib/markdown")>();
  return {
    ...real,
    renderMarkdown: (text: string) => {
      if (text.includes("breaks the renderer")) throw new RangeError("Maximum call stack size exceeded");
      return real.renderMarkdown(text);
    },
  };
});

function assistant(...texts: string[]): ViewMessage {
  return {
    key: "m1",
    id: 1,
    role: "assistant",
    status: "complete",
    blocks: texts.map((text) => ({ type: "text", text })),
    error: null,
  };
}

function props(message: ViewMessage) {
  return { message, calls: {}, onAnswer: vi.fn(), onOpenImage: vi.fn(), onOpenLink: vi.fn() };
}

describe("MessageView", () => {
  it("shows a reply that fails to render as its text, and the rest of the message as Markdown", () => {
    const { container } = render(MessageView, props(assistant("**fine** before", "this <b>breaks the renderer</b>")));
    expect(screen.getByText("fine").tagName).toBe("STRONG");
    const failed = container.querySelector("[data-render-failed]");
    expect(failed?.textContent).toBe("this <b>breaks the renderer</b>");
    expect(container.querySelector("b")).toBeNull();
  });

  it("shows an attached file by its name and size, and its text, as text, only when opened", async () => {
    const text = "<script>window.__x = 1</script>\n" + "row\n".repeat(299);
    const message: ViewMessage = {
      key: "u1",
      id: 1,
      role: "user",
      status: "complete",
      blocks: [{ type: "text", text: "Read this" }, { type: "file", name: "page.html", text }],
      error: null,
    };
    const { container } = render(MessageView, props(message));
    const card = screen.getByLabelText("Attached file page.html");
    expect(card.querySelector("[data-file-name]")?.textContent).toBe("page.html");
    expect(card.textContent).toContain("300 lines · 1.2 KiB");
    expect(container.querySelector("[data-file-text]")).toBeNull();
    card.querySelector("summary")?.click();
    await vi.waitFor(() => expect(container.querySelector("[data-file-text]")?.textContent).toBe(text));
    expect(container.querySelector("script")).toBeNull();
    // Copy takes the typed text, not the file.
    expect(screen.getByLabelText("Copy message")).toBeTruthy();
    expect(copiedText(message)).toBe("Read this");
  });
});
