import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import { ToolsetController } from "../lib/toolset.svelte";
import ToolsetPanel from "./ToolsetPanel.svelte";

/** The panel of a new chat with no tools, on screen. */
async function shown(): Promise<void> {
  const panel = new ToolsetController({
    toolChoices: vi.fn(() =>
      Promise.resolve({ toolset: { offServers: [], offTools: [] }, servers: [], offered: 0, tokens: 0, warning: null }),
    ),
    setConversationToolset: vi.fn(() => Promise.resolve()),
  });
  await panel.show(null);
  render(ToolsetPanel, { panel });
}

describe("the tools panel", () => {
  it("closes on Escape, focus back on its button, and the Escape goes no further", async () => {
    await shown();
    const button = screen.getByRole("button", { name: "Tools" });
    await fireEvent.click(button);
    expect(screen.getByRole("dialog", { name: "Tools for this conversation" })).toBeTruthy();
    // The chat stops a running turn on an Escape nobody took (ChatView reads defaultPrevented).
    let reachedTheChat: boolean | null = null;
    const chat = (event: KeyboardEvent) => (reachedTheChat = event.defaultPrevented);
    window.addEventListener("keydown", chat);
    try {
      await fireEvent.keyDown(screen.getByRole("dialog"), { key: "Escape" });
    } finally {
      window.removeEventListener("keydown", chat);
    }
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(document.activeElement).toBe(button);
    expect(reachedTheChat).toBe(true);
  });

  it("leaves an Escape typed elsewhere to where it was typed (a rename keeps its own)", async () => {
    await shown();
    await fireEvent.click(screen.getByRole("button", { name: "Tools" }));
    const rename = document.createElement("input");
    document.body.append(rename);
    rename.focus();
    let prevented: boolean | null = null;
    const field = (event: KeyboardEvent) => (prevented = event.defaultPrevented);
    rename.addEventListener("keydown", field);
    await fireEvent.keyDown(rename, { key: "Escape" });
    expect(prevented).toBe(false);
    expect(document.activeElement).toBe(rename);
    expect(screen.queryByRole("dialog")).toBeNull();
    rename.remove();
  });
});
