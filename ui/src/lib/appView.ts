// One MCP Apps view in the chat: the host side of the view's JSON-RPC over postMessage,
// through the maintained AppBridge of @modelcontextprotocol/ext-apps (loaded when the first
// view mounts). Nothing goes to the view before it says it is initialized; then it gets the
// call's complete arguments and its result. Every request of the view is relayed to the
// backend, which decides it (tool calls, context) or asks the user (links, messages).

import type { AppBridge, McpUiHostContext, McpUiDisplayMode } from "@modelcontextprotocol/ext-apps/app-bridge";
import { errorMessage } from "./api";
import { MAX_VIEW_ARGUMENTS, MAX_VIEW_CONTEXT, MAX_VIEW_MESSAGE } from "./bindings";
import { rearmConsent } from "./consent";
import type { ResultPart, ViewCall, ViewCallResult, ViewHandle } from "./types";

/** What the view's requests need from the app. */
export interface ViewServices {
  callTool(token: string, call: ViewCall): Promise<ViewCallResult>;
  /** Opens a link through the app's link policy (the user confirms natively). */
  /** Opens a link the view `token` asks for, after a native question naming its server. */
  openLink(token: string, url: string): Promise<void>;
  setContext(token: string, text: string): Promise<void>;
  close(token: string): Promise<void>;
  /** Adds the text as the user's next message if the user agrees; whether it was sent. */
  sendMessage(server: string, text: string): Promise<boolean>;
  /** The view set context for the next turn (what the host now holds for it). */
  contextSet(token: string, context: ViewContext): void;
  /** Whether a consent prompt waits in the chat: then no view is in full screen (it would
   *  cover the prompt) and none changes its height (it would move the prompt's buttons). */
  consentWaiting(): boolean;
}

/** What the view asks of its frame. */
export interface ViewFrame {
  resize(height: number): void;
  displayMode(mode: "inline" | "fullscreen"): void;
  /** Where the session is: "connecting", "initialized", "input", "result", "closed", or
   *  "failed: why" (shown as a data attribute, which the tests read). */
  status?(status: string): void;
}

/** The call the view belongs to, and its result once there is one. */
export interface ViewCallData {
  id: string;
  tool: string;
  arguments: Record<string, unknown>;
  result: { parts: ResultPart[]; isError: boolean } | null;
}

/** The tool result a view gets: text for `content`, structured content as is; media and
 *  Conduit's own parts stay out. */
export function toCallToolResult(parts: ResultPart[], isError: boolean): {
  content: Array<Record<string, unknown>>;
  structuredContent?: Record<string, unknown>;
  isError: boolean;
} {
  const content: Array<Record<string, unknown>> = [];
  let structured: unknown = undefined;
  for (const part of parts) {
    switch (part.type) {
      case "text":
        content.push({ type: "text", text: part.text });
        break;
      case "long_text":
        content.push({ type: "text", text: part.preview });
        break;
      case "resource_link":
        content.push({
          type: "resource_link",
          uri: part.uri,
          name: part.name ?? part.uri,
          ...(part.mime ? { mimeType: part.mime } : {}),
        });
        break;
      case "resource":
        if (part.text != null) {
          content.push({
            type: "resource",
            resource: { uri: part.uri, text: part.text, ...(part.mime ? { mimeType: part.mime } : {}) },
          });
        }
        break;
      case "structured":
        structured ??= part.value;
        break;
      case "view":
        if (part.structured != null) structured = part.structured;
        break;
      default:
        break;
    }
  }
  const isObject = structured !== null && typeof structured === "object" && !Array.isArray(structured);
  return {
    content,
    ...(isObject ? { structuredContent: structured as Record<string, unknown> } : {}),
    isError,
  };
}

/** The text of a view's content blocks (text blocks only; others are named). */
function blocksText(blocks: unknown): string {
  if (!Array.isArray(blocks)) return "";
  return blocks
    .map((block: { type?: unknown; text?: unknown }) =>
      block?.type === "text" && typeof block.text === "string" ? block.text : `[${String(block?.type)} content]`,
    )
    .join("\n");
}

/** The length of `text` in UTF-8 bytes, as the host counts it. */
function utf8Bytes(text: string): number {
  return new TextEncoder().encode(text).length;
}

/** A deep copy as plain JSON data. */
function plain<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** The tallest a view may make itself inline, and the least, in CSS pixels. */
export const MAX_HEIGHT = 1600;
const MIN_HEIGHT = 60;
/** How long a view may take to finish before it is unmounted anyway. */
const TEARDOWN_WAIT_MS = 2000;

type BridgeModule = typeof import("@modelcontextprotocol/ext-apps/app-bridge");
let bridgeModule: Promise<BridgeModule> | null = null;
function loadBridge(): Promise<BridgeModule> {
  bridgeModule ??= import("@modelcontextprotocol/ext-apps/app-bridge");
  return bridgeModule;
}

/** How many of a view's links the user may turn down before it asks no more (until it
 *  is opened again), as for its tool calls (the host's DECLINES_BEFORE_QUIET). */
export const LINKS_BEFORE_QUIET = 3;

/** How the host's `open_external` starts its refusal when the link was not asked about
 *  because another native confirmation was open (src-tauri/src/commands.rs). */
const OTHER_CONFIRMATION_OPEN = "another confirmation is open";

/** The host's side of one view. */
export class ViewSession {
  #bridge: AppBridge | null = null;
  #initialized = false;
  #delivered: { input: boolean; result: boolean } = { input: false, result: false };
  #call: ViewCallData;
  #closed = false;
  /** Links of this view the user turned down (or could not be asked about): past
   *  LINKS_BEFORE_QUIET it asks no more. The native dialog blocks the whole app, and a
   *  view that asked again on every Cancel kept the user from ever reaching the chat. */
  #linksRefused = 0;
  /** Why the call ended without a result, once it did. */
  #cancelled: string | null = null;
  #cancelSent = false;
  /** Whether the frame is in full screen now. */
  #fullscreen = false;
  /** The view left full screen once (by itself, by the user's hand, or because a consent
   *  prompt appeared): it may not take it again by itself. */
  #leftFullscreen = false;
  /** The height the view last gave itself. */
  #height: number | null = null;
  /** The height the view asked for while a consent prompt waited. */
  #heldHeight: number | null = null;
  /** What the view said about itself (for the frame's title and tests). */
  appName: string | null = null;

  constructor(
    readonly handle: ViewHandle,
    call: ViewCallData,
    readonly services: ViewServices,
    readonly frame: ViewFrame,
    private hostContext: McpUiHostContext,
  ) {
    // Plain JSON: what the page holds may be reactive proxies, which postMessage cannot clone.
    this.#call = plain(call);
    this.hostContext = plain(hostContext);
  }

  get initialized(): boolean {
    return this.#initialized;
  }

  /** Connects the bridge over `transport` (the view's frame's window); call it before the
   *  frame loads the view, so the view's first message is heard. */
  async connect(transport: import("@modelcontextprotocol/client").Transport): Promise<void> {
    const { AppBridge } = await loadBridge();
    const bridge = new AppBridge(
      null,
      { name: "Conduit", version: "0.1.0" },
      {
        openLinks: {},
        serverTools: {},
        logging: {},
        updateModelContext: { text: {} },
        message: { text: {} },
      },
      { hostContext: this.hostContext },
    );
    const { token, server } = this.handle;
    bridge.oninitialized = () => {
      this.#initialized = true;
      this.appName = bridge.getAppVersion()?.name ?? null;
      this.frame.status?.("initialized");
      this.#deliverLater();
    };
    bridge.onsizechange = ({ height }) => {
      if (typeof height === "number" && Number.isFinite(height)) {
        const shown = Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, Math.ceil(height)));
        // While a consent prompt waits the view keeps its height (the last one asked for
        // comes once it is answered): a view resizing itself over and over would move the
        // prompt's buttons, which then take no click, for as long as it liked.
        if (this.services.consentWaiting()) {
          this.#heldHeight = shown;
          return;
        }
        this.#resize(shown);
      }
    };
    // A view being closed (the chat moved to another conversation) asks the user for
    // nothing more: a message, a link or context it sends while it finishes would wait in
    // the next conversation. Its calls of its own server's tools still go (saving its
    // state as it finishes), under their approval, until the host closes it.
    bridge.oncalltool = async (params) => {
      // Refused here, a flood of megabytes never crosses to the host (which refuses it too).
      if (utf8Bytes(JSON.stringify(params.arguments ?? {})) > MAX_VIEW_ARGUMENTS)
        throw new Error(`a view's call may carry at most ${MAX_VIEW_ARGUMENTS} bytes of arguments`);
      const answer = await this.services.callTool(token, {
        tool: params.name,
        arguments: (params.arguments ?? {}) as Record<string, unknown>,
      });
      return answer.result as Awaited<ReturnType<NonNullable<AppBridge["oncalltool"]>>>;
    };
    bridge.onopenlink = async ({ url }) => {
      if (this.#closed || this.#linksRefused >= LINKS_BEFORE_QUIET) return { isError: true };
      try {
        await this.services.openLink(token, url);
        return {};
      } catch (e) {
        // A link the dialog could not show (another confirmation was open) is no refusal.
        if (!errorMessage(e).startsWith(OTHER_CONFIRMATION_OPEN)) this.#linksRefused += 1;
        return { isError: true };
      }
    };
    bridge.onmessage = async (params) => {
      if (this.#closed) return { isError: true };
      const text = blocksText(params.content);
      // Past the bound the user is not asked: the prompt shows a message whole.
      if (!text.trim() || utf8Bytes(text) > MAX_VIEW_MESSAGE) return { isError: true };
      const sent = await this.services.sendMessage(server, text);
      return sent ? {} : { isError: true };
    };
    bridge.onupdatemodelcontext = async (params) => {
      if (this.#closed) throw new Error("the view is closed; nothing was kept");
      let text = blocksText(params.content);
      if (params.structuredContent) text = [text, JSON.stringify(params.structuredContent)].filter(Boolean).join("\n");
      // The host keeps no more; refused here, a flood of megabytes never crosses to it.
      if (utf8Bytes(text) > MAX_VIEW_CONTEXT)
        throw new Error(`a view's context is at most ${MAX_VIEW_CONTEXT} bytes; nothing was kept`);
      await this.services.setContext(token, text);
      this.services.contextSet(token, { server, text });
      return {};
    };
    bridge.onrequestdisplaymode = async ({ mode }) => {
      // A view takes full screen once: after it left (by itself or by the user's hand), only
      // the user's own button enters it again. A view that could take it again would cover
      // the window (the Stop button, the consent prompts) for good, or cover a prompt and
      // uncover it under the user's next click. Never while a consent prompt waits.
      const granted: McpUiDisplayMode =
        mode === "fullscreen" &&
        this.fullscreenOffered &&
        !this.#closed &&
        (this.#fullscreen || !this.#leftFullscreen) &&
        !this.services.consentWaiting()
          ? "fullscreen"
          : "inline";
      this.#show(granted);
      return { mode: granted };
    };
    bridge.onloggingmessage = ({ level, data }) => {
      console.debug(`[view of ${server}] ${level}:`, data);
    };
    this.#bridge = bridge;
    await bridge.connect(transport);
  }

  /** The call ended without a result (stopped, or its server went away). */
  cancelled(reason: string): void {
    if (this.#delivered.result || this.#cancelled !== null) return;
    this.#cancelled = reason;
    this.#deliverLater();
  }

  /** The call's result arrived (or was there from the start). */
  resultArrived(result: { parts: ResultPart[]; isError: boolean }): void {
    this.#call = { ...this.#call, result: plain(result) };
    this.#deliverLater();
  }

  /** The app's theme changed. */
  themeChanged(theme: "light" | "dark"): void {
    this.#setContext({ theme });
  }

  /** The user pressed the frame's full screen button; the mode the frame is now in (full
   *  screen is refused while a consent prompt waits in the chat). */
  userChose(mode: "inline" | "fullscreen"): "inline" | "fullscreen" {
    const granted =
      mode === "fullscreen" && (this.services.consentWaiting() || !this.fullscreenOffered) ? "inline" : mode;
    this.#show(granted);
    return granted;
  }

  /** A consent prompt appeared in the chat: the view leaves full screen (for good, unless
   *  the user's button enters it again). */
  leaveFullscreen(): void {
    if (this.#fullscreen) this.#show("inline");
  }

  /** No consent prompt waits any more: the height the view asked for meanwhile applies. */
  promptsAnswered(): void {
    const held = this.#heldHeight;
    this.#heldHeight = null;
    if (held !== null) this.#resize(held);
  }

  #resize(shown: number): void {
    // What is below the view moves: a consent button that slid under the cursor waits
    // again (`consent.ts` looks at where each one is every frame).
    this.#height = shown;
    this.frame.resize(shown);
  }

  get fullscreen(): boolean {
    return this.#fullscreen;
  }

  /** Whether the view may be shown full screen: not when it said which modes it supports
   *  (`availableDisplayModes`, at initialization) and full screen is not one (a view
   *  that says nothing is taken to fit any). */
  get fullscreenOffered(): boolean {
    const modes = this.#bridge?.getAppCapabilities()?.availableDisplayModes;
    return modes === undefined || modes.includes("fullscreen");
  }

  /** Puts the frame in `mode` and tells the view. */
  #show(mode: "inline" | "fullscreen"): void {
    if (this.#fullscreen && mode === "inline") this.#leftFullscreen = true;
    if (this.#fullscreen !== (mode === "fullscreen")) rearmConsent();
    this.#fullscreen = mode === "fullscreen";
    this.frame.displayMode(mode);
    this.#setContext({ displayMode: mode });
  }

  #setContext(change: Partial<McpUiHostContext>): void {
    this.hostContext = { ...this.hostContext, ...change };
    // The bridge sends only what changed, and only once the view is initialized.
    this.#bridge?.setHostContext(this.hostContext);
  }

  /** Delivers what is due, saying so on the frame if it fails. */
  #deliverLater(): void {
    this.#deliver().catch((e: unknown) => this.frame.status?.(`failed: ${errorMessage(e)}`));
  }

  async #deliver(): Promise<void> {
    const bridge = this.#bridge;
    if (!bridge || !this.#initialized || this.#closed) return;
    if (!this.#delivered.input) {
      this.#delivered.input = true;
      await bridge.sendToolInput({ arguments: this.#call.arguments });
      this.frame.status?.("input");
    }
    if (this.#cancelled !== null && !this.#cancelSent && !this.#delivered.result) {
      this.#cancelSent = true;
      await bridge.sendToolCancelled({ reason: this.#cancelled });
      this.frame.status?.("cancelled");
      return;
    }
    const result = this.#call.result;
    if (result && !this.#delivered.result && !this.#cancelSent) {
      this.#delivered.result = true;
      await bridge.sendToolResult(toCallToolResult(result.parts, result.isError) as Parameters<AppBridge["sendToolResult"]>[0]);
      this.frame.status?.("result");
    }
  }

  /** Asks the view to finish (waiting at most TEARDOWN_WAIT_MS), then closes it. */
  async teardown(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    const bridge = this.#bridge;
    if (bridge && this.#initialized) {
      await Promise.race([
        bridge.teardownResource({}).catch(() => undefined),
        new Promise((done) => setTimeout(done, TEARDOWN_WAIT_MS)),
      ]);
    }
    await bridge?.close().catch(() => undefined);
    await this.services.close(this.handle.token).catch(() => undefined);
    this.frame.status?.("closed");
  }
}

/** What a view gave the model as context: which server's view, and the text. */
export interface ViewContext {
  server: string;
  text: string;
}

/** A view's context waiting to go with the next message, shown above the composer. */
export interface PendingContext extends ViewContext {
  token: string;
}

/** A message a view asks to send as the user, waiting for the user's answer. */
export interface ViewMessageAsk {
  server: string;
  text: string;
  /** The views' context that would go with it (the user sees it before agreeing). */
  context: ViewContext[];
  answer(send: boolean): void;
}

/** The consent prompts the chat shows, each kind apart. */
export type ConsentPrompt = "view message" | "tool approval" | "server question" | "sampling request";

/** The chat's open views: the theme they follow, the views whose context goes with the
 *  next message, a view's message waiting for consent, full screen kept off while any
 *  consent prompt waits, and teardown of them all before the chat shows another
 *  conversation. */
export class ViewRegistry {
  #sessions = new Set<ViewSession>();
  /** The views whose context goes with the next message, and that context's text. */
  #contextFrom = new Map<string, ViewContext>();
  /** Each view's context updates on their way to the host, one after another (so the
   *  host holds the last one sent), and how many are still on their way. */
  #contextSending = new Map<string, Promise<void>>();
  #contextInFlight = new Map<string, number>();
  /** Set while a view's message waits for the user's consent. */
  asking: ViewMessageAsk | null = null;
  /** Told what view context waits to go with the next message whenever that changes: the
   *  user sees it before it goes, and may take it out. */
  onContext: ((pending: PendingContext[]) => void) | null = null;
  /** The kinds of consent prompt waiting in the chat. */
  #prompts = new Set<ConsentPrompt>();

  constructor(
    readonly api: {
      openAppView(call: string, conversation: string | null): Promise<import("./types").ViewLookup>;
      closeAppView(token: string): Promise<void>;
      appViewCallTool(token: string, call: ViewCall): Promise<ViewCallResult>;
      setAppViewContext(token: string, text: string): Promise<void>;
      appViewOpenLink(token: string, url: string): Promise<void>;
    },
    /** Sends text as the user's message with the context of the views named; whether
     *  the turn started. */
    private send: (text: string, context: string[]) => Promise<boolean>,
    /** Tells the screen a view's message waits for consent (or no longer does). */
    private asked: (ask: ViewMessageAsk | null) => void,
    /** The conversation on screen (null: a new chat whose id is not known yet). */
    private conversation: () => string | null = () => null,
  ) {}

  /** Asks the host for the view of the call `call` on screen: the host decides whether
   *  it ran that call (in this run of the app, or saved in the conversation on screen
   *  with a result that names a view), and which server's view it is. */
  open(call: string): Promise<import("./types").ViewLookup> {
    return this.api.openAppView(call, this.conversation());
  }

  /** Whether prompts of this kind wait in the chat. While any prompt does, no view is in
   *  full screen: each leaves it when one appears, and none may enter it (a view in full
   *  screen covers the prompts; one that left it as the user's click came down would put
   *  the prompt's button under the next click). */
  prompting(kind: ConsentPrompt, pending: boolean): void {
    if (!pending) {
      this.#prompts.delete(kind);
      if (!this.prompted) for (const session of this.#sessions) session.promptsAnswered();
      return;
    }
    this.#prompts.add(kind);
    for (const session of this.#sessions) session.leaveFullscreen();
  }

  /** Whether a consent prompt waits in the chat. */
  get prompted(): boolean {
    return this.#prompts.size > 0;
  }

  services(): ViewServices {
    return {
      consentWaiting: () => this.prompted,
      callTool: (token, call) => this.api.appViewCallTool(token, call),
      openLink: (token, url) => this.api.appViewOpenLink(token, url),
      setContext: (token, text) => {
        this.#contextInFlight.set(token, (this.#contextInFlight.get(token) ?? 0) + 1);
        const sending = (this.#contextSending.get(token) ?? Promise.resolve())
          .catch(() => undefined)
          .then(() => this.api.setAppViewContext(token, text))
          .finally(() => this.#contextInFlight.set(token, (this.#contextInFlight.get(token) ?? 1) - 1));
        this.#contextSending.set(token, sending);
        return sending;
      },
      close: (token) => {
        this.#contextFrom.delete(token);
        this.#contextSending.delete(token);
        this.#contextInFlight.delete(token);
        this.#contextChanged();
        return this.api.closeAppView(token);
      },
      sendMessage: (server, text) =>
        new Promise<boolean>((resolve) => {
          if (this.asking) {
            resolve(false); // one question at a time: a view cannot stack them
            return;
          }
          // The context shown is the context sent: what a view changes or adds while
          // the question waits stays for the next message.
          const shown = new Map(this.#contextFrom);
          this.asking = {
            server,
            text,
            context: [...shown.values()],
            answer: (send) => {
              this.asking = null;
              this.prompting("view message", false);
              this.asked(null);
              if (!send) {
                resolve(false);
                return;
              }
              // Only context the host still holds as shown: none that changed since, or
              // whose change is still on its way to the host.
              const seen = [...shown]
                .filter(
                  ([token, context]) =>
                    this.#contextFrom.get(token)?.text === context.text &&
                    !this.#contextInFlight.get(token),
                )
                .map(([token]) => token);
              void this.#sendWith(seen, (context) => this.send(text, context)).then(resolve, () =>
                resolve(false),
              );
            },
          };
          this.prompting("view message", true);
          this.asked(this.asking);
        }),
      // Newest last: the host sends the newest contexts when more views set one than a
      // message takes.
      contextSet: (token, context) => {
        this.#contextFrom.delete(token);
        this.#contextFrom.set(token, context);
        this.#contextChanged();
      },
    };
  }

  /** The user took a view's context out of the next message: it does not go (the view
   *  may set new context, which then waits again). */
  dropContext(token: string): void {
    if (this.#contextFrom.delete(token)) this.#contextChanged();
  }

  #contextChanged(): void {
    this.onContext?.([...this.#contextFrom].map(([token, context]) => ({ token, ...context })));
  }

  add(session: ViewSession): void {
    this.#sessions.add(session);
  }

  remove(session: ViewSession): void {
    this.#sessions.delete(session);
  }

  /** Sends a message (`send` gets the tokens of the views whose context goes with it);
   *  the tokens are given back when the turn did not start (the host still holds their
   *  context). Whether it started. */
  async withContext(send: (context: string[]) => Promise<boolean>): Promise<boolean> {
    return this.#sendWith([...this.#contextFrom.keys()], send);
  }

  /** Sends with the context of the views named, taken from what waits; given back when
   *  the turn did not start (the host still holds it). */
  async #sendWith(tokens: string[], send: (context: string[]) => Promise<boolean>): Promise<boolean> {
    const taken = tokens.flatMap((token) => {
      const context = this.#contextFrom.get(token);
      this.#contextFrom.delete(token);
      return context === undefined ? [] : [[token, context] as const];
    });
    if (taken.length > 0) this.#contextChanged();
    const started = await send(taken.map(([token]) => token));
    // A view that set newer context meanwhile keeps it.
    if (!started && taken.length > 0) {
      for (const [token, context] of taken) if (!this.#contextFrom.has(token)) this.#contextFrom.set(token, context);
      this.#contextChanged();
    }
    return started;
  }

  themeChanged(theme: "light" | "dark"): void {
    for (const session of this.#sessions) session.themeChanged(theme);
  }

  /** Asks every open view to finish, and waits (each at most TEARDOWN_WAIT_MS). */
  async teardownAll(): Promise<void> {
    const sessions = [...this.#sessions];
    this.#sessions.clear();
    this.asking?.answer(false);
    await Promise.all(sessions.map((session) => session.teardown()));
  }
}
