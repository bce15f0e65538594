import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import { ToolsetController } from "../lib/toolset.svelte";
import type { ConversationAllow } from "../lib/types";
import ToolsetPanel from "./ToolsetPanel.svelte";

/** The panel of a conversation (a new chat by default) with no tools, on screen; the
 *  tools allowed in it are `allowed`. */
async function shown(conversation: string | null = null, allowed: ConversationAllow[] = []) {
  const api = {
    toolChoices: vi.fn(() =>
      Promise.resolve({ toolset: { offServers: [], offTools: [] }, servers: [], offered: 0, tokens: 0, warning: null }),
    ),
    setConversationToolset: vi.fn(() => Promise.resolve()),
    conversationAllows: vi.fn(() => Promise.resolve(allowed)),
    revokeConversationAllow: vi.fn((_c: string, server: string, tool: string) => {
      allowed = allowed.filter((a) => a.server !== server || a.tool !== tool);
      return Promise.resolve(true);
    }),
  };
  const panel = new ToolsetController(api);
  await panel.show(conversation);
  render(ToolsetPanel, { panel });
  return api;
}

describe("the tools panel", () => {
  it("lists the tools allowed in this conversation, read when it opens, and asks again for one", async () => {
    const api = await shown("c1", [{ server: "fs", tool: "read_file" }]);
    expect(api.conversationAllows).not.toHaveBeenCalled();
    await fireEvent.click(screen.getByRole("button", { name: "Tools" }));
    const section = await screen.findByRole("region", { name: "Allowed in this conversation" });
    expect(section.textContent).toContain("read_file of fs");
    await fireEvent.click(screen.getByRole("button", { name: "Ask again before read_file of fs" }));
    expect(api.revokeConversationAllow).toHaveBeenCalledWith("c1", "fs", "read_file");
    await vi.waitFor(() => expect(screen.queryByRole("region", { name: "Allowed in this conversation" })).toBeNull());
  });

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
