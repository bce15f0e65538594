import { describe, expect, it } from "vitest";
import { bytesOf } from "./composer";
import { withFrozenPrototype } from "./frozenPrototype";
import {
  applyEvent,
  awaitingApproval,
  callLabel,
  callOf,
  emptyState,
  fromStored,
  mayShowView,
  pendingApproval,
  pendingUserMessage,
  startingNotice,
  copiedText,
  editableMessage,
  lastAnswer,
  listed,
  markReplaced,
  mayAnswerAgain,
  keepAllowedBy,
  standingAllowText,
  usageLine,
} from "./turn";
import type { StoredMessage, ToolCall } from "./types";

const call: ToolCall = { id: "c1", name: "everything__echo", arguments: { message: "hi" } };

describe("a turn's events", () => {
  it("stream text into one assistant message and tool calls into cards with states", () => {
    const state = emptyState();
    state.messages.push(pendingUserMessage([{ type: "text", text: "hello" }]));
    applyEvent(state, { type: "turn_started", turn: 1 }, 0);
    applyEvent(state, { type: "text_delta", text: "Hel" }, 0);
    applyEvent(state, { type: "text_delta", text: "lo" }, 0);
    applyEvent(state, { type: "tool_call_started", id: "c1", name: call.name }, 0);
    applyEvent(state, { type: "tool_call_ready", call }, 100);
    applyEvent(state, { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: { readOnlyHint: true } }, 100);
    expect(state.calls.c1?.state).toBe("approval");
    expect(state.calls.c1?.allowedBy).toBeNull();
    applyEvent(state, { type: "tool_progress", id: "c1", progress: { progress: 1, total: 2 } }, 150);
    expect(state.calls.c1?.state).toBe("running");
    applyEvent(
      state,
      {
        type: "tool_result",
        result: { call_id: "c1", name: call.name, is_error: false, parts: [{ type: "text", text: "hi" }] },
        duration_ms: 42,
      },
      200,
    );
    expect(state.messages).toHaveLength(2);
    const answer = state.messages[1];
    expect(answer?.blocks[0]).toEqual({ type: "text", text: "Hello" });
    expect(answer?.blocks[1]).toMatchObject({ type: "tool_call", id: "c1", arguments: { message: "hi" } });
    expect(state.calls.c1).toMatchObject({ state: "done", durationMs: 42 });
  });

  it("take the approval controls away once an allowed call runs, before any progress", () => {
    const state = emptyState();
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    applyEvent(state, { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: {} }, 0);
    expect(pendingApproval(call, state.calls.c1)).not.toBeNull();
    applyEvent(state, { type: "tool_call_running", id: "c1" }, 10);
    expect(state.calls.c1?.state).toBe("running");
    expect(pendingApproval(call, state.calls.c1)).toBeNull();
  });

  it("keep the standing allow a call ran by, as the host names it", () => {
    const state = emptyState();
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    applyEvent(state, { type: "tool_call_allowed", id: "c1", by: "conversation" }, 0);
    applyEvent(state, { type: "tool_call_running", id: "c1" }, 1);
    expect(state.calls.c1?.allowedBy).toBe("conversation");
    expect(state.calls.c1?.state).toBe("running");
    expect(standingAllowText("settings")).toBe("Allowed without asking: always allowed in Settings");
    expect(standingAllowText("auto")).toBe("Allowed without asking: --approve auto");
    // Read back from the store once the turn ended, the card still says it.
    const stored = fromStored([
      { id: 1, role: "assistant", status: "complete", blocks: [{ type: "tool_call", ...call }], usage: null, error: null, createdAt: 0 },
    ]);
    keepAllowedBy(state, stored);
    expect(stored.calls.c1?.allowedBy).toBe("conversation");
    const elsewhere = fromStored([]);
    keepAllowedBy(state, elsewhere);
    expect(elsewhere.calls).toEqual({});
  });

  it("show an allowed call waiting for a place without its controls, and never as running", () => {
    const state = emptyState();
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    applyEvent(state, { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: {} }, 0);
    applyEvent(state, { type: "tool_call_queued", id: "c1" }, 5);
    expect(state.calls.c1?.state).toBe("queued");
    expect(pendingApproval(call, state.calls.c1)).toBeNull();
    // Its view may not mount: the call has not run.
    expect(mayShowView(call, state.calls.c1)).toBe(false);
    applyEvent(state, { type: "cancelled" }, 9);
    expect(state.calls.c1?.state).toBe("interrupted");
    expect(mayShowView(call, state.calls.c1)).toBe(false);
  });

  it("mark what was in flight as interrupted on a stop, and denied calls as denied", () => {
    const state = emptyState();
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    applyEvent(state, { type: "tool_call_denied", id: "c1", reason: "the user chose Deny" }, 0);
    applyEvent(state, { type: "text_delta", text: "partial" }, 0);
    applyEvent(state, { type: "cancelled" }, 0);
    expect(state.calls.c1?.state).toBe("denied");
    expect(state.messages[0]?.status).toBe("interrupted");
  });

  it("show a retry with its deadline", () => {
    const state = emptyState();
    applyEvent(
      state,
      { type: "retrying", attempt: 1, delay_ms: 3000, error: { kind: "rate_limited", message: "slow down" } },
      1000,
    );
    expect(state.retry).toEqual({ message: "slow down", until: 4000 });
    applyEvent(state, { type: "text_delta", text: "ok" }, 5000);
    expect(state.retry).toBeNull();
  });
});

describe("stored messages", () => {
  it("pair each call with its result from the tool message", () => {
    const messages: StoredMessage[] = [
      { id: 1, role: "assistant", status: "complete", error: null, usage: null, createdAt: 0, blocks: [{ type: "tool_call", ...call }] },
      {
        id: 2,
        role: "tool",
        status: "complete",
        error: null,
        usage: null,
        createdAt: 0,
        blocks: [
          {
            type: "tool_result",
            call_id: "c1",
            name: call.name,
            is_error: true,
            parts: [{ type: "text", text: "The user denied this tool call: no" }],
          },
        ],
      },
    ];
    const state = fromStored(messages);
    expect(state.calls.c1?.state).toBe("denied");
    expect(state.calls.c1?.result?.call_id).toBe("c1");
  });

  it("show a call no result was saved for as interrupted, not done (the app closed while it ran)", () => {
    const messages: StoredMessage[] = [
      { id: 1, role: "assistant", status: "complete", error: null, usage: null, createdAt: 0, blocks: [{ type: "tool_call", ...call }] },
    ];
    const state = fromStored(messages);
    expect(state.calls.c1?.state).toBe("interrupted");
    expect(state.calls.c1?.result).toBeNull();
  });

  it("open with a provider's call ids named like Object.prototype's members, as the window freezes it", () => {
    // Conversations saved before Conduit gave calls its own ids carry the provider's.
    const ids = ["toString", "constructor", "__proto__", "hasOwnProperty"];
    const messages: StoredMessage[] = [
      {
        id: 1, role: "assistant", status: "complete", error: null, usage: null, createdAt: 0,
        blocks: ids.map((id) => ({ type: "tool_call", id, name: "echo", arguments: {} })),
      },
      {
        id: 2, role: "tool", status: "complete", error: null, usage: null, createdAt: 0,
        blocks: ids.map((id) => ({ type: "tool_result", call_id: id, name: "echo", is_error: false, parts: [] })),
      },
    ];
    const state = withFrozenPrototype(() => fromStored(messages));
    for (const id of ids) {
      expect(Object.hasOwn(state.calls, id), id).toBe(true);
      expect(callOf(state.calls, id)?.result?.call_id).toBe(id);
    }
    expect(Object.getPrototypeOf(state.calls)).toBe(Object.prototype);
  });

  it("find no call for an id the calls only inherit", () => {
    expect(callOf(emptyState().calls, "toString")).toBeUndefined();
    expect(callOf(emptyState().calls, "constructor")).toBeUndefined();
  });
});

describe("a call waiting for approval", () => {
  it("is a consent prompt on screen until the host hears the answer", () => {
    const state = emptyState();
    applyEvent(state, { type: "turn_started", turn: 1 }, 0);
    applyEvent(state, { type: "tool_call_started", id: "c1", name: call.name }, 0);
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    expect(awaitingApproval(state)).toBe(false);
    applyEvent(state, { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: {} }, 0);
    expect(awaitingApproval(state)).toBe(true);
    applyEvent(state, { type: "tool_call_running", id: "c1" }, 0);
    expect(awaitingApproval(state)).toBe(false);
  });
});

describe("approval keyed by Conduit's call ids", () => {
  const read: ToolCall = {
    id: "call_1",
    wire_id: "gemini-call-0",
    name: "fs__read_file",
    origin: { server: "fs", tool: "read_file" },
    arguments: { path: "notes.txt" },
  };
  const run: ToolCall = {
    id: "call_2",
    wire_id: "gemini-call-0",
    name: "sh__run",
    origin: { server: "sh", tool: "run" },
    arguments: { command: "rm -rf ~" },
  };

  it("give the controls only to the card whose block is the pending call", () => {
    const state = emptyState();
    applyEvent(state, { type: "turn_started", turn: 1 }, 0);
    applyEvent(state, { type: "tool_call_started", id: read.id, name: read.name, origin: read.origin }, 0);
    applyEvent(state, { type: "tool_call_ready", call: read }, 0);
    applyEvent(state, { type: "approval_requested", call: read, arguments_text: JSON.stringify(read.arguments, null, 2), title: null, origin: read.origin, annotations: {} }, 0);
    applyEvent(
      state,
      {
        type: "tool_result",
        result: { call_id: read.id, wire_id: "gemini-call-0", name: read.name, is_error: false, parts: [] },
        duration_ms: 1,
      },
      0,
    );
    applyEvent(state, { type: "message_done", message: { role: "assistant", blocks: [{ type: "tool_call", ...read }] } }, 0);
    // The next response numbers its call from 0 again; Conduit's ids differ.
    applyEvent(state, { type: "turn_started", turn: 2 }, 0);
    applyEvent(state, { type: "tool_call_ready", call: run }, 0);
    applyEvent(
      state,
      { type: "approval_requested", call: run, arguments_text: JSON.stringify(run.arguments, null, 2), title: null, origin: { server: "sh", tool: "run" }, annotations: {}, changes: ["x changed"] },
      0,
    );
    expect(pendingApproval(read, state.calls[read.id])).toBeNull();
    expect(state.calls[read.id]?.state).toBe("done");
    const asked = pendingApproval(run, state.calls[run.id]);
    expect(asked?.call.id).toBe("call_2");
    expect(asked?.origin).toEqual({ server: "sh", tool: "run" });
    expect(asked?.changes).toEqual(["x changed"]);
    // Even a view that somehow held another call's question gives no controls to a card
    // whose block is not that call.
    expect(pendingApproval(read, state.calls[run.id])).toBeNull();
    expect(pendingApproval({ ...run, arguments: { command: "ls" } }, state.calls[run.id])).toBeNull();
  });

  it("name the real server and tool, never parsed out of the exposed name", () => {
    expect(callLabel(run)).toEqual({ server: "sh", tool: "run" });
    expect(callLabel({ id: "c", name: "a__b__c", arguments: {} }, { server: "a__b", tool: "c" })).toEqual({
      server: "a__b",
      tool: "c",
    });
    expect(callLabel({ id: "c", name: "everything__echo", arguments: {} })).toEqual({
      server: null,
      tool: "everything__echo",
    });
  });
});

describe("conversations saved with the provider's repeating ids", () => {
  it("give each call its own card and result", () => {
    const legacy = (id: number, path: string): StoredMessage[] => [
      {
        id,
        role: "assistant",
        status: "complete",
        error: null,
        usage: null,
        createdAt: 0,
        blocks: [{ type: "tool_call", id: "gemini-call-0", name: "fs__read_file", arguments: { path } }],
      },
      {
        id: id + 1,
        role: "tool",
        status: "complete",
        error: null,
        usage: null,
        createdAt: 0,
        blocks: [
          {
            type: "tool_result",
            call_id: "gemini-call-0",
            name: "fs__read_file",
            is_error: false,
            parts: [{ type: "text", text: `contents of ${path}` }],
          },
        ],
      },
    ];
    const state = fromStored([...legacy(1, "a.txt"), ...legacy(3, "b.txt")]);
    const ids = state.messages
      .flatMap((m) => m.blocks)
      .flatMap((b) => (b.type === "tool_call" ? [b.id] : []));
    expect(new Set(ids).size).toBe(2);
    const texts = ids.map((id) => {
      const part = state.calls[id]?.result?.parts[0];
      return part?.type === "text" ? part.text : null;
    });
    expect(texts).toEqual(["contents of a.txt", "contents of b.txt"]);
  });
});

describe("the saved copy of a live message", () => {
  it("keeps the live message's key, so its views are not remounted", async () => {
    const { keepKeys } = await import("./turn");
    const call = { type: "tool_call" as const, id: "call_1", name: "t", arguments: {} };
    const previous = [
      { key: "live3", id: null, role: "assistant" as const, status: "complete" as const, blocks: [call], error: null },
    ];
    const next = [
      { key: "m7", id: 7, role: "user" as const, status: "complete" as const, blocks: [{ type: "text" as const, text: "hi" }], error: null },
      { key: "m8", id: 8, role: "assistant" as const, status: "complete" as const, blocks: [call], error: null },
    ];
    keepKeys(previous, next);
    expect(next.map((m) => m.key)).toEqual(["m7", "live3"]);
  });

  it("never gives a message a key another message has of its own", async () => {
    const { keepKeys } = await import("./turn");
    // "Show earlier messages" in an old conversation: its first call's id repeats in an
    // earlier message, and the message that held it on screen (m51) is still in the list.
    const call = (id: string) => ({ type: "tool_call" as const, id, name: "t", arguments: {} });
    const message = (key: string, id: string) => ({
      key, id: 0, role: "assistant" as const, status: "complete" as const, blocks: [call(id)], error: null,
    });
    const previous = [message("m51", "gemini-call-0")];
    const next = [message("m1", "gemini-call-0"), message("m51", "gemini-call-0@51.0")];
    keepKeys(previous, next);
    const keys = next.map((m) => m.key);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys).toEqual(["m1", "m51"]);
  });
});

describe("a call's view mounts only once the host said the call runs", () => {
  const origin = { server: "charts", tool: "show" };
  const call: ToolCall = { id: "c1", name: "charts__show", arguments: { secret: "s3" }, origin };
  const other: ToolCall = { id: "c2", name: "charts__show", arguments: {}, origin };

  it("not while the call waits to be allowed or asked about, nor after a stop before it ran", () => {
    const state = emptyState();
    applyEvent(state, { type: "turn_started", turn: 1 }, 0);
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    // A later call of the same answer still streams: the first is complete, not allowed.
    applyEvent(state, { type: "tool_call_started", id: "c2", name: other.name, origin }, 0);
    expect(state.calls.c1?.state).toBe("ready");
    expect(mayShowView(call, state.calls.c1)).toBe(false);
    applyEvent(
      state,
      { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), origin, title: null, annotations: {} },
      0,
    );
    expect(mayShowView(call, state.calls.c1)).toBe(false);
    applyEvent(state, { type: "cancelled" }, 0);
    expect(state.calls.c1?.state).toBe("interrupted");
    expect(mayShowView(call, state.calls.c1)).toBe(false);
  });

  it("once allowed, while it runs and after a stop; with a result, when it names a view", () => {
    const state = emptyState();
    applyEvent(state, { type: "tool_call_ready", call }, 0);
    applyEvent(state, { type: "tool_call_running", id: "c1" }, 0);
    expect(mayShowView(call, state.calls.c1)).toBe(true);
    applyEvent(state, { type: "cancelled" }, 0);
    expect(state.calls.c1?.state).toBe("interrupted");
    expect(mayShowView(call, state.calls.c1)).toBe(true);

    applyEvent(state, { type: "tool_call_ready", call: other }, 0);
    applyEvent(state, { type: "tool_call_denied", id: "c2", reason: "no" }, 0);
    expect(mayShowView(other, state.calls.c2)).toBe(false);
    applyEvent(
      state,
      {
        type: "tool_result",
        result: { call_id: "c2", name: other.name, is_error: false, parts: [{ type: "text", text: "x" }] },
        duration_ms: 1,
      },
      0,
    );
    expect(mayShowView(other, state.calls.c2)).toBe(false);
    // A call with no server behind it never has a view.
    expect(mayShowView({ ...call, origin: undefined }, state.calls.c1)).toBe(false);
  });
});

describe("the notice of servers starting", () => {
  it("names one server or several, with their hidden characters marked", () => {
    expect(startingNotice(["filesystem"])).toBe("Waiting for filesystem to start, so that the model can use its tools…");
    expect(startingNotice(["filesystem", "github", "notion"])).toBe(
      "Waiting for filesystem, github, and notion to start, so that the model can use their tools…",
    );
    expect(startingNotice(["evil\u202Eeman"])).not.toContain("\u202E");
  });
});

describe("what Copy takes of a message", () => {
  it("takes its text blocks as written, a blank line between, and marks hidden characters", () => {
    const message = {
      key: "m1",
      id: 1,
      role: "assistant" as const,
      status: "complete" as const,
      error: null,
      blocks: [
        { type: "reasoning" as const, text: "thinking" },
        { type: "text" as const, text: "Run this:\n\n```sh\nls -la\n```" },
        { type: "tool_call" as const, id: "c1", name: "fs__read", arguments: {} },
        { type: "text" as const, text: "  " },
        { type: "text" as const, text: "Then rm \u202Eevil" },
      ],
    };
    const copied = copiedText(message);
    expect(copied.startsWith("Run this:\n\n```sh\nls -la\n```\n\nThen rm ")).toBe(true);
    expect(copied).not.toContain("\u202E");
    expect(copied).not.toContain("thinking");
    expect(copiedText({ ...message, blocks: [{ type: "text" as const, text: "" }] })).toBe("");
  });
});

describe("a message's token footer", () => {
  it("says what the request read and wrote, cached and reasoning tokens when there are any", () => {
    expect(usageLine({ inputTokens: 12345, outputTokens: 678, cacheReadTokens: 0, reasoningTokens: 0 })).toBe(
      "12,345 tokens in · 678 out",
    );
    expect(usageLine({ inputTokens: 2000, outputTokens: 50, cacheReadTokens: 1500, reasoningTokens: 30 })).toBe(
      "2,000 tokens in (1,500 cached) · 50 out (30 reasoning)",
    );
    expect(usageLine({ inputTokens: 0, outputTokens: 0, cacheReadTokens: 0, reasoningTokens: 0 })).toBeNull();
    expect(usageLine(null)).toBeNull();
    expect(usageLine(undefined)).toBeNull();
  });
});

describe("how a conversation's stored messages end", () => {
  const message = (id: number, role: StoredMessage["role"], status: StoredMessage["status"] = "complete"): StoredMessage => ({
    id,
    role,
    status,
    blocks: [{ type: "text", text: `message ${id}` }],
    usage: null,
    error: null,
    createdAt: 0,
  });

  it("offers what can be tried again, and not what finished or the user stopped", () => {
    expect(lastAnswer([])).toBeNull();
    expect(lastAnswer([message(1, "user")])).toBe("unanswered");
    expect(lastAnswer([message(1, "user"), message(2, "assistant")])).toBeNull();
    expect(lastAnswer([message(1, "user"), message(2, "assistant", "error")])).toBe("failed");
    expect(lastAnswer([message(1, "user"), message(2, "assistant", "interrupted")])).toBeNull();
    // Ended after its tool results: failed there, or met the turn limit.
    expect(lastAnswer([message(1, "user"), message(2, "assistant"), message(3, "tool")])).toBe("unfinished");
    // Stopped during its calls (their results saved as interrupted): the user's choice.
    expect(lastAnswer([message(1, "user"), message(2, "assistant", "interrupted"), message(3, "tool")])).toBeNull();
    // An answer replaced by another is not what the conversation ends with.
    expect(lastAnswer([message(1, "user"), message(2, "assistant", "error"), message(3, "assistant", "replaced")])).toBe("failed");
    expect(lastAnswer([message(1, "user"), message(2, "assistant", "replaced")])).toBe("unanswered");
  });

  it("offers Answer again for a last answer that finished or was stopped, after a message of the user's", () => {
    expect(mayAnswerAgain([])).toBe(false);
    expect(mayAnswerAgain([message(1, "user")])).toBe(false);
    expect(mayAnswerAgain([message(1, "user"), message(2, "assistant")])).toBe(true);
    expect(mayAnswerAgain([message(1, "user"), message(2, "assistant", "interrupted")])).toBe(true);
    expect(mayAnswerAgain([message(1, "user"), message(2, "assistant", "error")])).toBe(false);
    expect(mayAnswerAgain([message(1, "user"), message(2, "assistant"), message(3, "tool")])).toBe(false);
    // Stopped during its calls: Try again is not offered, Answer again is.
    const stopped = [message(1, "user"), message(2, "assistant", "interrupted"), message(3, "tool")];
    expect(lastAnswer(stopped)).toBeNull();
    expect(mayAnswerAgain(stopped)).toBe(true);
    expect(mayAnswerAgain([message(1, "user"), message(2, "assistant", "replaced"), message(3, "assistant")])).toBe(true);
    // A conversation of the assistant's alone (a prompt's) has nothing to answer.
    expect(mayAnswerAgain([message(1, "assistant")])).toBe(false);
  });

  it("folds a replaced answer's messages together where they were, and marks what an answer again replaces", () => {
    const view = (id: number, role: StoredMessage["role"], status: StoredMessage["status"] = "complete") => ({
      key: `m${id}`,
      id,
      role,
      status,
      blocks: [],
      error: null,
    });
    const messages = [view(1, "user"), view(2, "assistant", "replaced"), view(3, "assistant", "replaced"), view(4, "assistant"), view(5, "user"), view(6, "assistant", "replaced")];
    const items = listed(messages);
    expect(items.map((item) => (item.kind === "message" ? item.message.id : item.messages.map((m) => m.id)))).toEqual([1, [2, 3], 4, 5, [6]]);

    const live = [view(1, "user"), view(2, "assistant"), view(3, "user"), view(4, "assistant"), view(5, "tool"), view(6, "assistant", "interrupted")];
    markReplaced(live);
    expect(live.map((m) => m.status)).toEqual(["complete", "complete", "complete", "replaced", "replaced", "replaced"]);
  });

  it("gives back the last message of the user's as written, with its images and files, and marks it replaced with its answer", async () => {
    const image = { hash: "a".repeat(64), mime: "image/png", bytes: 10, width: 1, height: 1 } as unknown as import("./types").MediaRef;
    const user = (id: number, blocks: StoredMessage["blocks"], status: StoredMessage["status"] = "complete"): StoredMessage => ({
      id, role: "user", status, blocks, usage: null, error: null, createdAt: 0,
    });
    expect(editableMessage([])).toBeNull();
    expect(editableMessage([user(1, [{ type: "text", text: "Hi" }, { type: "image", media: image }]), message(2, "assistant")])).toEqual({ id: 1, text: "Hi", attachments: [image] });
    // A text file comes back as a file the composer holds.
    const withFile = editableMessage([
      user(1, [{ type: "text", text: "Sum up" }, { type: "file", name: "plan\\u{202e}.md", text: "# Plan\r\n" }]),
    ]);
    expect(withFile?.text).toBe("Sum up");
    const [file] = withFile?.attachments ?? [];
    if (!(file instanceof File)) throw new Error("the file comes back as a file");
    expect(file.name).toBe("plan\\u{202e}.md");
    expect(new TextDecoder().decode(await bytesOf(file))).toBe("# Plan\r\n");
    // A PDF comes back as the stored PDF under its name.
    const pdf = { hash: "b".repeat(64), mime: "application/pdf", bytes: 2_400_000 };
    expect(editableMessage([user(1, [{ type: "text", text: "Sum up" }, { type: "document", name: "attention.pdf", media: pdf }])])).toEqual({
      id: 1,
      text: "Sum up",
      attachments: [{ name: "attention.pdf", media: pdf }],
    });
    // The last not replaced.
    expect(editableMessage([user(1, [{ type: "text", text: "Old" }]), user(3, [{ type: "text", text: "Gone" }], "replaced")])?.id).toBe(1);
    // A resource's text beside the typed text: the composer cannot hold it.
    expect(editableMessage([user(1, [{ type: "text", text: "@notes" }, { type: "text", text: "contents" }])])).toBeNull();

    const view = (id: number, role: StoredMessage["role"], status: StoredMessage["status"] = "complete") => ({ key: `m${id}`, id, role, status, blocks: [], error: null });
    const live = [view(1, "user"), view(2, "assistant"), view(3, "user"), view(4, "assistant", "replaced"), view(5, "assistant")];
    markReplaced(live, true);
    expect(live.map((m) => m.status)).toEqual(["complete", "complete", "replaced", "replaced", "replaced"]);
  });
});
