import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { McpOverview, ToolCall, TurnEvent } from "../lib/types";
import ChatView from "./ChatView.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// The host's window events are not pulled here: no host answers.
vi.mock("../lib/windowEvents", () => ({ onWindowEvent: () => () => {} }));
const api = apiModule as unknown as ApiMock;

afterEach(() => resetApi(api));

function props(onOpenSettings = vi.fn()) {
  return {
    conversationId: null,
    title: "New chat",
    groups: [{ provider: "claude", models: ["claude-sonnet"] }],
    providersSetUp: true,
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
    api.sendMessage.mockRejectedValue({
      message: "the environment variable ANTHROPIC_API_KEY holding the API key is not set",
      action: "open_settings",
    });
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

  it("keeps a running turn's state, approval included, while another conversation is open", async () => {
    let emit: ((event: TurnEvent) => void) | undefined;
    api.sendMessage.mockImplementation((_request, onEvent) => {
      emit = onEvent;
      return Promise.resolve({ conversation: "c1", turn: "t1" });
    });
    api.loadMessages.mockImplementation((conversation) =>
      conversation === "c2"
        ? Promise.resolve([
            {
              id: 9,
              role: "user",
              status: "complete",
              error: null,
              usage: null,
              createdAt: 0,
              blocks: [{ type: "text", text: "Another chat" }],
            },
          ])
        : Promise.reject(new Error(`unexpected conversation ${conversation}`)),
    );
    const view = render(ChatView, props());
    const box = screen.getByRole("textbox", { name: "Message" });
    await fireEvent.input(box, { target: { value: "Start" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    await waitFor(() => expect(emit).toBeDefined());
    const call: ToolCall = { id: "k1", name: "srv__echo", arguments: {} };
    emit?.({ type: "agent", event: { type: "text_delta", text: "Partial answer" } });
    await screen.findByText("Partial answer");

    await view.rerender({ conversationId: "c2", title: "Other" });
    await screen.findByText("Another chat");
    emit?.({ type: "agent", event: { type: "tool_call_ready", call } });
    emit?.({ type: "agent", event: { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: {} } });
    await new Promise((done) => setTimeout(done, 50));
    expect(screen.queryByText("Partial answer")).toBeNull();

    await view.rerender({ conversationId: "c1", title: "Start" });
    await screen.findByText("Partial answer");
    const allow = screen.getByRole("button", { name: "Allow once" }) as HTMLButtonElement;
    // A consent button: above any view in full screen, and no click in its first 500 ms.
    expect(allow.closest('[aria-label="Approve tool call"]')?.classList.contains("z-40")).toBe(true);
    expect(allow.disabled).toBe(true);
    expect((screen.getByRole("button", { name: "Always allow this tool" }) as HTMLButtonElement).disabled).toBe(true);
    await fireEvent.click(allow);
    expect(api.answerApproval).not.toHaveBeenCalled();
    await waitFor(() => expect(allow.disabled).toBe(false));
  });

  it("shows the Last answer bar on a conversation opened from a new chat, then Answer again and Edit on a whole one", async () => {
    const message = (id: number, role: "user" | "assistant", text: string, status: "complete" | "error") => ({
      id, role, status, error: status === "error" ? "the model crashed" : null, usage: null, createdAt: 0, blocks: [{ type: "text" as const, text }],
    });
    api.loadMessages.mockImplementation((conversation) =>
      Promise.resolve(
        conversation === "c1"
          ? [message(1, "user", "Where?", "complete"), message(2, "assistant", "The", "error")]
          : [message(3, "user", "Name a colour", "complete"), message(4, "assistant", "Red.", "complete")],
      ),
    );
    api.sendMessage.mockResolvedValue({ conversation: "c2", turn: "t1" });
    const view = render(ChatView, props());
    // From a new chat (nothing on screen), the failed conversation: the bar comes.
    await view.rerender({ conversationId: "c1", title: "Where?" });
    const bar = await screen.findByRole("status", { name: "Last answer" });
    expect(bar.textContent).toContain("The last answer did not finish.");
    expect(screen.queryByRole("button", { name: "Answer again" })).toBeNull();

    await view.rerender({ conversationId: "c2", title: "Colours" });
    await screen.findByRole("button", { name: "Answer again" });
    expect(screen.queryByRole("status", { name: "Last answer" })).toBeNull();
    await fireEvent.click(screen.getByRole("button", { name: "Edit message" }));
    await screen.findByRole("status", { name: "Editing" });
    const box = screen.getByRole("textbox", { name: "Message" }) as HTMLTextAreaElement;
    await waitFor(() => expect(box.value).toBe("Name a colour"));
    await fireEvent.input(box, { target: { value: "Name a fruit" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    await waitFor(() =>
      expect(api.sendMessage).toHaveBeenCalledWith(expect.objectContaining({ conversation: "c2", text: "Name a fruit", replaceMessage: true }), expect.any(Function)),
    );
    await screen.findByText("An earlier version of your message, changed below");
  });

  it("stops a running turn on Escape, but not while a dialog is open", async () => {
    api.sendMessage.mockResolvedValue({ conversation: "c1", turn: "t1" });
    api.stopTurn.mockResolvedValue(undefined);
    render(ChatView, props());
    const box = screen.getByRole("textbox", { name: "Message" });
    await fireEvent.input(box, { target: { value: "Start" } });
    await fireEvent.keyDown(box, { key: "Enter" });
    await waitFor(() => expect(api.sendMessage).toHaveBeenCalled());
    // A sampling review's image viewer is open, and focus went back to the message box.
    const dialog = document.createElement("div");
    dialog.setAttribute("role", "dialog");
    dialog.setAttribute("aria-modal", "true");
    document.body.append(dialog);
    await fireEvent.keyDown(box, { key: "Escape" });
    expect(api.stopTurn).not.toHaveBeenCalled();
    dialog.remove();
    await fireEvent.keyDown(box, { key: "Escape" });
    await waitFor(() => expect(api.stopTurn).toHaveBeenCalledWith("t1"));
  });

  it("says when the mcpServers file does not read, and that servers keep running", () => {
    const view = props();
    view.mcp = {
      servers: [],
      configError: "/h/mcp_servers.json is not valid JSON (line 3, column 1): expected value.",
    } as McpOverview;
    render(ChatView, view);
    const status = screen.getByRole("status", { name: "mcpServers file problem" });
    expect(status.textContent).toContain("line 3, column 1");
    expect(status.textContent).toContain("keep running");
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
