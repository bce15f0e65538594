import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { McpOverview } from "../lib/types";
import ChatView from "./ChatView.svelte";

const invoke = vi.hoisted(() => vi.fn());
vi.mock("@tauri-apps/api/core", () => ({ invoke, Channel: class {} }));

afterEach(() => invoke.mockReset());

function props(onOpenSettings = vi.fn()) {
  return {
    conversationId: null,
    title: "New chat",
    groups: [{ provider: "claude", models: ["claude-sonnet"] }],
    choice: { provider: "claude", model: "claude-sonnet" },
    mcp: { servers: [], configError: null } as McpOverview,
    onChoose: vi.fn(),
    onConversationStarted: vi.fn(),
    onChanged: vi.fn(),
    onOpenSettings,
    onProvidersChanged: vi.fn(),
  };
}

describe("ChatView", () => {
  it("gives a refused message back and points to Settings when the key is missing", async () => {
    invoke.mockImplementation((command: string) =>
      command === "send_message"
        ? Promise.reject({
            message: "the environment variable ANTHROPIC_API_KEY holding the API key is not set",
            action: "settings",
          })
        : Promise.reject(new Error(command)),
    );
    const onOpenSettings = vi.fn();
    render(ChatView, props(onOpenSettings));
    const box = screen.getByRole("textbox", { name: "Message" }) as HTMLTextAreaElement;
    await fireEvent.input(box, { target: { value: "Hello there" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("ANTHROPIC_API_KEY");
    await waitFor(() => expect(box.value).toBe("Hello there"));
    expect(screen.queryByRole("article", { name: "Your message" })).toBeNull();
    await fireEvent.click(screen.getByRole("button", { name: "Open Settings" }));
    expect(onOpenSettings).toHaveBeenCalled();
  });

  it("names a failed MCP server and why", () => {
    const view = props();
    view.mcp = {
      servers: [{ name: "github", state: "failed", reason: "it exited (exit status: 1)", stderr_tail: [] }],
      configError: null,
    };
    render(ChatView, view);
    const status = screen.getByRole("status", { name: "MCP server problems" });
    expect(status.textContent).toContain("github");
    expect(status.textContent).toContain("it exited");
  });
});
