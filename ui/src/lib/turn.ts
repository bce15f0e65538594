// How a conversation looks while a turn streams: the agent's events folded into messages
// and per-call states. Pure functions, so the rules are tested without a window.
import { attachedAgain, type Attachment } from "./composer";
import { visible } from "./visibleText";
import type {
  AgentEvent,
  Block,
  MediaRef,
  MessageStatus,
  Progress,
  Role,
  StandingAllow,
  StoredMessage,
  ToolAnnotations,
  ToolCall,
  ToolOrigin,
  ToolResult,
  Usage,
} from "./types";

/** A message on screen: stored (with an id) or still streaming. */
export interface ViewMessage {
  key: string;
  id: number | null;
  role: Role;
  status: MessageStatus;
  blocks: Block[];
  error: string | null;
  /** What the model request that wrote it counted (stored assistant messages). */
  usage?: Usage | null;
}

export type CallState =
  | "streaming"
  /** Complete, not yet allowed: the host decides (or asks the user) next. */
  | "ready"
  | "approval"
  /** Allowed, waiting for one of the places the host runs a response's calls in. */
  | "queued"
  | "running"
  | "done"
  | "failed"
  | "denied"
  | "interrupted";

/** A question the host asked about one call: the call exactly as it was asked about. */
export interface Approval {
  call: ToolCall;
  /** The arguments as the host wrote them (exact: JSON numbers here lose digits past 2^53). */
  argumentsText: string;
  origin: ToolOrigin | null;
  title: string | null;
  annotations: ToolAnnotations;
  /** What the server says the tool does, as the model was shown it. */
  description: string;
  changes: string[];
}

/** What a tool card shows about its call beyond the call itself. */
export interface CallView {
  state: CallState;
  result: ToolResult | null;
  progress: Progress | null;
  durationMs: number | null;
  startedAt: number | null;
  approval: Approval | null;
  deniedReason: string | null;
  /**
   * The host said the call runs (allowed by the user or a policy). Only then may the
   * call's view mount and get its arguments: a call stopped before that never ran.
   */
  allowed: boolean;
  /** The allow that let it run without a question, as the host said; null when the user
   *  was asked (or the conversation was loaded: this is not stored). */
  allowedBy: StandingAllow | null;
}

/** Carries what the host said of the calls on screen (the allow that let each run
 *  unasked, which is not stored) into the same calls read back from the store. Call ids
 *  are Conduit's own, unique beyond one conversation. */
export function keepAllowedBy(previous: ChatState, next: ChatState): void {
  for (const [id, call] of Object.entries(next.calls)) {
    const before = callOf(previous.calls, id);
    if (before?.allowedBy) call.allowedBy = before.allowedBy;
  }
}

/** What a call's card says about the allow that let it run unasked. */
export function standingAllowText(by: StandingAllow): string {
  switch (by) {
    case "settings":
      return "Allowed without asking: always allowed in Settings";
    case "conversation":
      return "Allowed without asking: allowed in this conversation";
    case "auto":
      return "Allowed without asking: --approve auto";
  }
}

export interface ChatState {
  messages: ViewMessage[];
  /** By call id; read through `callOf`, since only own entries are calls. */
  calls: Record<string, CallView>;
  /** Set while the provider is being retried: why, and until when. */
  retry: { message: string; until: number } | null;
  /** The servers the turn waits for to start before it begins (their tools are offered
   *  once they are up); empty when it waits for none. */
  starting: string[];
}

export function emptyState(): ChatState {
  return { messages: [], calls: {}, retry: null, starting: [] };
}

/**
 * The view of call `id`, if any. Only the record's own entries count: a saved conversation
 * can carry the provider's ids, and one named `toString` or `constructor` must not find what
 * every object inherits.
 */
export function callOf(calls: Record<string, CallView>, id: string): CallView | undefined {
  return Object.hasOwn(calls, id) ? calls[id] : undefined;
}

/** A call's view before the host said anything of it but its state. */
export function newCall(state: CallState): CallView {
  return {
    state,
    result: null,
    progress: null,
    durationMs: null,
    startedAt: null,
    approval: null,
    deniedReason: null,
    allowed: false,
    allowedBy: null,
  };
}

/**
 * Gives the messages of `next` that hold a tool call already on screen in `previous` that
 * message's key, so the saved copy of a message replaces the live one without remounting
 * it (an MCP Apps view in it keeps running instead of reloading). Call ids are the host's
 * own and unique, so a match is the same message.
 */
export function keepKeys(previous: ViewMessage[], next: ViewMessage[]): void {
  const keyOfCall = new Map<string, string>();
  for (const message of previous) {
    for (const block of message.blocks) {
      if (block.type === "tool_call") keyOfCall.set(block.id, message.key);
    }
  }
  if (keyOfCall.size === 0) return;
  // A key another message of `next` has of its own is not given away: two messages under
  // one key make Svelte drop the list's update (old conversations repeat provider call
  // ids, which the window makes distinct per message, so one can match another's).
  const own = new Set(next.map((message) => message.key));
  const used = new Set<string>();
  for (const message of next) {
    const call = message.blocks.find((block) => block.type === "tool_call" && keyOfCall.has(block.id));
    const key = call?.type === "tool_call" ? keyOfCall.get(call.id) : undefined;
    if (key === undefined || used.has(key)) continue;
    if (key !== message.key && own.has(key)) continue;
    used.add(key);
    message.key = key;
  }
}

/** Calls and their states as the stored messages say (results live in tool messages). */
export function fromStored(messages: StoredMessage[]): ChatState {
  const state = emptyState();
  const distinct = distinctCallIds(messages);
  state.messages = distinct.map((message) => ({
    key: `m${message.id}`,
    id: message.id,
    role: message.role,
    status: message.status,
    blocks: message.blocks,
    error: message.error,
    usage: message.usage,
  }));
  // A Map while it is built, then own properties: assigning a key such as `toString` to a
  // plain object throws where Object.prototype is frozen (tauri.conf.json freezePrototype).
  const calls = new Map<string, CallView>();
  for (const message of distinct) {
    for (const block of message.blocks) {
      if (block.type === "tool_call" && !calls.has(block.id)) {
        calls.set(block.id, newCall(message.status === "interrupted" ? "interrupted" : "done"));
      }
      if (block.type === "tool_result") {
        const call = calls.get(block.call_id) ?? newCall("done");
        call.result = block;
        call.state = resultState(block);
        calls.set(block.call_id, call);
      }
    }
  }
  // A call no result was saved for never finished here: the app was closed or crashed
  // while it ran (its batch's results are saved together). It did not end "done".
  for (const call of calls.values()) if (call.result === null && call.state === "done") call.state = "interrupted";
  state.calls = Object.fromEntries(calls);
  return state;
}

/**
 * Conversations saved before Conduit gave calls its own ids carry the provider's, which
 * repeat (`gemini-call-0` in every response). Such a repeated id gets a key of its own on
 * screen, and the results in the tool message after it follow, in order, so each card
 * shows its own call's result.
 */
function distinctCallIds(messages: StoredMessage[]): StoredMessage[] {
  const seen = new Set<string>();
  // The last assistant message's calls: original id → screen keys, in call order.
  let keys = new Map<string, string[]>();
  return messages.map((message) => {
    if (message.role === "assistant") {
      keys = new Map();
      let changed = false;
      const blocks = message.blocks.map((block, index) => {
        if (block.type !== "tool_call") return block;
        const key = seen.has(block.id) ? `${block.id}@${message.id}.${index}` : block.id;
        seen.add(key);
        keys.set(block.id, [...(keys.get(block.id) ?? []), key]);
        if (key === block.id) return block;
        changed = true;
        return { ...block, id: key };
      });
      return changed ? { ...message, blocks } : message;
    }
    if (message.role === "tool") {
      let changed = false;
      const blocks = message.blocks.map((block) => {
        if (block.type !== "tool_result") return block;
        const key = keys.get(block.call_id)?.shift();
        if (key === undefined || key === block.call_id) return block;
        changed = true;
        return { ...block, call_id: key };
      });
      return changed ? { ...message, blocks } : message;
    }
    return message;
  });
}

function resultState(result: ToolResult): CallState {
  if (!result.is_error) return "done";
  const text = result.parts.map((p) => (p.type === "text" ? p.text : "")).join(" ");
  if (text.startsWith("The user denied")) return "denied";
  if (text.startsWith("The user stopped")) return "interrupted";
  return "failed";
}

let nextKey = 0;

function streamingMessage(role: Role): ViewMessage {
  nextKey += 1;
  return { key: `live${nextKey}`, id: null, role, status: "streaming", blocks: [], error: null };
}

/** The user's message as it is sent, before the store has it. */
export function pendingUserMessage(blocks: Block[]): ViewMessage {
  return { ...streamingMessage("user"), status: "complete", blocks };
}

function liveAssistant(state: ChatState): ViewMessage {
  const last = state.messages[state.messages.length - 1];
  if (last && last.role === "assistant" && last.status === "streaming") return last;
  const message = streamingMessage("assistant");
  state.messages.push(message);
  return message;
}

function appendText(message: ViewMessage, type: "text" | "reasoning", text: string): void {
  const last = message.blocks[message.blocks.length - 1];
  if (last && last.type === type) {
    last.text += text;
  } else {
    message.blocks.push({ type, text } as Block);
  }
}

function upsertCall(message: ViewMessage, call: ToolCall): void {
  const index = message.blocks.findIndex((b) => b.type === "tool_call" && b.id === call.id);
  const block: Block = { type: "tool_call", ...call };
  if (index >= 0) message.blocks[index] = block;
  else message.blocks.push(block);
}

function callView(state: ChatState, id: string): CallView {
  const existing = callOf(state.calls, id);
  if (existing) return existing;
  const created = newCall("streaming");
  // A live call's id is the host's own (`call_` and a UUID), never a name objects inherit.
  state.calls[id] = created;
  return created;
}

/** Folds one agent event into the state (mutates it: Svelte's $state tracks the changes). */
export function applyEvent(state: ChatState, event: AgentEvent, now: number): void {
  switch (event.type) {
    case "turn_started":
      state.retry = null;
      liveAssistant(state);
      break;
    case "text_delta":
      state.retry = null;
      appendText(liveAssistant(state), "text", event.text);
      break;
    case "reasoning_delta":
      appendText(liveAssistant(state), "reasoning", event.text);
      break;
    case "tool_call_started":
      upsertCall(liveAssistant(state), {
        id: event.id,
        name: event.name,
        arguments: {},
        ...(event.origin ? { origin: event.origin } : {}),
      });
      callView(state, event.id);
      break;
    case "tool_call_ready": {
      upsertCall(liveAssistant(state), event.call);
      const call = callView(state, event.call.id);
      // Not "running": the call is not allowed yet (the approval question comes after
      // the whole answer has streamed).
      call.state = "ready";
      call.startedAt = now;
      break;
    }
    case "approval_requested": {
      const call = callView(state, event.call.id);
      call.state = "approval";
      call.approval = {
        call: event.call,
        argumentsText: event.arguments_text,
        origin: event.origin ?? event.call.origin ?? null,
        title: event.title ?? null,
        annotations: event.annotations,
        description: event.description ?? "",
        changes: event.changes ?? [],
      };
      break;
    }
    case "tool_call_denied": {
      const call = callView(state, event.id);
      call.state = "denied";
      call.approval = null;
      call.deniedReason = event.reason;
      break;
    }
    case "tool_call_allowed": {
      callView(state, event.id).allowedBy = event.by;
      break;
    }
    case "tool_call_queued": {
      const call = callView(state, event.id);
      call.approval = null;
      call.state = "queued";
      break;
    }
    case "tool_call_running": {
      const call = callView(state, event.id);
      call.approval = null;
      call.state = "running";
      call.allowed = true;
      break;
    }
    case "tool_progress": {
      const call = callView(state, event.id);
      call.progress = event.progress;
      if (call.state === "approval") call.approval = null;
      call.state = "running";
      call.allowed = true;
      break;
    }
    case "tool_result": {
      const call = callView(state, event.result.call_id);
      call.result = event.result;
      call.durationMs = event.duration_ms;
      call.approval = null;
      if (call.state !== "denied") call.state = resultState(event.result);
      break;
    }
    case "message_done":
      if (event.message.role === "assistant") {
        const message = liveAssistant(state);
        message.blocks = event.message.blocks;
        message.status = "complete";
      }
      break;
    case "retrying":
      state.retry = {
        message: event.error.message,
        until: now + event.delay_ms,
      };
      break;
    case "cancelled":
      for (const message of state.messages) {
        if (message.status === "streaming") message.status = "interrupted";
      }
      for (const call of Object.values(state.calls)) {
        if (
          call.state === "running" ||
          call.state === "queued" ||
          call.state === "ready" ||
          call.state === "approval" ||
          call.state === "streaming"
        ) {
          call.state = "interrupted";
          call.approval = null;
        }
      }
      break;
    default:
      break;
  }
}

/**
 * Whether a call's MCP Apps view may mount. A view gets the call's arguments, which it
 * could send to the origins it declares: so only once the host said the call runs
 * (allowed by the user or a policy), never while it waits for approval, and not for a
 * call stopped before it was allowed. With a result, only when the result names a view.
 */
export function mayShowView(call: ToolCall, view: CallView | undefined): boolean {
  if (!call.origin || !view) return false;
  if (view.result) return view.result.parts.some((part) => part.type === "view");
  return view.allowed && (view.state === "running" || view.state === "interrupted");
}

/** Whether a call on screen waits for the user's approval (its card shows the question). */
export function awaitingApproval(chat: ChatState): boolean {
  return Object.values(chat.calls).some((call) => call.state === "approval");
}

/**
 * The question a card may answer: only the card whose block is the very call the host
 * asked about (same id, same tool, same arguments) gets approval controls.
 */
export function pendingApproval(block: ToolCall, view: CallView | undefined): Approval | null {
  const approval = view?.state === "approval" ? view.approval : null;
  if (!approval) return null;
  const asked = approval.call;
  const same =
    asked.id === block.id &&
    asked.name === block.name &&
    JSON.stringify(asked.arguments ?? {}) === JSON.stringify(block.arguments ?? {});
  return same ? approval : null;
}

/**
 * What a card names: the real server and tool from the host; a call without an origin
 * (a built-in tool, or one saved before origins were recorded) by its whole exposed name,
 * never guessed from it.
 */
export function callLabel(call: ToolCall, origin?: ToolOrigin | null): { server: string | null; tool: string } {
  const known = origin ?? call.origin;
  return known ? { server: known.server, tool: known.tool } : { server: null, tool: call.name };
}

/** What the chat says while a turn waits for `servers` to start (each name as it shows,
 *  hidden characters marked). */
export function startingNotice(servers: string[]): string {
  const names = new Intl.ListFormat("en", { style: "long", type: "conjunction" }).format(
    servers.map((name) => visible(name)),
  );
  const whose = servers.length === 1 ? "its" : "their";
  return `Waiting for ${names} to start, so that the model can use ${whose} tools…`;
}

/** Whether a conversation's stored messages (oldest first) end without an answer that
 *  finished, which "Try again" can give: "failed" when the last answer failed;
 *  "unanswered" when the last message has none at all (the turn failed before the model
 *  wrote a word, or the app closed meanwhile); "unfinished" when the answer stopped after
 *  its tool results (it failed there, or met the most requests a message may make).
 *  Null when the last answer finished, the user stopped it, or there are no messages. */
export function lastAnswer(messages: StoredMessage[]): "failed" | "unanswered" | "unfinished" | null {
  const shown = messages.filter((message) => message.status !== "replaced");
  const last = shown.at(-1);
  if (!last) return null;
  if (last.role === "user") return "unanswered";
  if (last.role === "tool") {
    // Stopped during its calls: the answer before the results was stopped, and so was
    // the turn; the user chose that.
    const answer = shown.at(-2);
    return answer?.role === "assistant" && answer.status === "interrupted" ? null : "unfinished";
  }
  return last.status === "error" ? "failed" : null;
}

/** Whether "Answer again" can write the last answer anew: it finished, or the user
 *  stopped it (a failed one offers Try again instead). */
export function mayAnswerAgain(messages: StoredMessage[]): boolean {
  const shown = messages.filter((message) => message.status !== "replaced");
  if (!shown.some((m) => m.role === "user")) return false;
  let last = shown.at(-1);
  // Stopped during its calls: the results saved after the stopped answer.
  if (last?.role === "tool" && shown.at(-2)?.status === "interrupted") last = shown.at(-2);
  return last !== undefined && last.role === "assistant" && (last.status === "complete" || last.status === "interrupted");
}

/** The last message of the user's, if "Edit" can give it back to the composer as it was
 *  written: its text, images, PDFs and text files (one with resources or a view's context attached, which
 *  the composer cannot hold, is not offered). */
export function editableMessage(messages: StoredMessage[]): { id: number; text: string; attachments: Attachment[] } | null {
  let last: StoredMessage | undefined;
  for (const message of messages) if (message.role === "user" && message.status !== "replaced") last = message;
  if (!last) return null;
  const texts: string[] = [];
  const attachments: Attachment[] = [];
  for (const block of last.blocks) {
    if (block.type === "text") texts.push(block.text);
    else if (block.type === "image") attachments.push(block.media);
    else if (block.type === "document") attachments.push({ name: block.name, media: block.media });
    else if (block.type === "file") attachments.push(attachedAgain(block));
    else return null;
  }
  if (texts.length > 1) return null;
  return { id: last.id, text: texts[0] ?? "", attachments };
}

/** The messages as the chat lists them: each on its own, except that the messages of an
 *  answer written again since ("replaced") go together, folded, where they were. */
export type ListedItem = { kind: "message"; message: ViewMessage } | { kind: "replaced"; key: string; messages: ViewMessage[] };

export function listed(messages: ViewMessage[]): ListedItem[] {
  const items: ListedItem[] = [];
  for (const message of messages) {
    const last = items.at(-1);
    if (message.status !== "replaced") items.push({ kind: "message", message });
    else if (last?.kind === "replaced") last.messages.push(message);
    else items.push({ kind: "replaced", key: `replaced-${message.key}`, messages: [message] });
  }
  return items;
}

/** Marks, on screen, the messages after the last user message as replaced (with that
 *  message too, `withTheMessage`): what an "Answer again" (an "Edit") replaces, as the
 *  host marks it. */
export function markReplaced(messages: ViewMessage[], withTheMessage = false): void {
  for (const message of [...messages].reverse()) {
    if (message.status === "replaced") continue;
    if (message.role === "user") {
      if (withTheMessage) message.status = "replaced";
      return;
    }
    message.status = "replaced";
  }
}

/** What "Copy" puts on the clipboard for a message: its text blocks as written (Markdown),
 *  a blank line between them, with what hides or rearranges text shown as its code, as on
 *  screen (a bidi override must not carry a hidden command into a terminal). Empty when
 *  it has no text. */
export function copiedText(message: ViewMessage): string {
  return message.blocks
    .flatMap((block) => (block.type === "text" && block.text.trim() !== "" ? [visible(block.text, { keepLines: true })] : []))
    .join("\n\n");
}

/** The tokens a model request read and wrote, as a message's footer says them; null when
 *  the provider counted none. */
export function usageLine(usage: Usage | null | undefined): string | null {
  if (!usage || (usage.inputTokens === 0 && usage.outputTokens === 0)) return null;
  const count = (n: number) => n.toLocaleString("en");
  const cached = usage.cacheReadTokens > 0 ? ` (${count(usage.cacheReadTokens)} cached)` : "";
  const reasoning = usage.reasoningTokens > 0 ? ` (${count(usage.reasoningTokens)} reasoning)` : "";
  return `${count(usage.inputTokens)} tokens in${cached} · ${count(usage.outputTokens)} out${reasoning}`;
}
