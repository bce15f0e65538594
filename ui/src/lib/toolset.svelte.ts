// The composer's tools panel without the view: which servers and tools the conversation
// on screen may use (a new chat's choice is held here and sent with its first message;
// a saved conversation's is kept by the host), with the count and token cost the host
// computes.
import type * as Api from "./api";
import { errorMessage } from "./api";
import type { ConversationAllow, ToolChoices, Toolset } from "./types";
import { uniqueBy } from "./unique";

/** The commands the panel uses, typed by api.ts (tests give typed mocks). */
export type ToolsetApi = Pick<
  typeof Api,
  "toolChoices" | "setConversationToolset" | "conversationAllows" | "revokeConversationAllow"
>;

function empty(): Toolset {
  return { offServers: [], offTools: [] };
}

/** `toolset` with `server` on or off (switching a server on also clears its single tools). */
export function withServer(toolset: Toolset, server: string, on: boolean): Toolset {
  const offServers = toolset.offServers.filter((s) => s !== server);
  if (!on) offServers.push(server);
  const offTools = on ? toolset.offTools.filter((t) => t.server !== server) : toolset.offTools;
  return { offServers, offTools };
}

/** `toolset` with one tool on or off. */
export function withTool(toolset: Toolset, server: string, tool: string, on: boolean): Toolset {
  const offTools = toolset.offTools.filter((t) => !(t.server === server && t.tool === tool));
  if (!on) offTools.push({ server, tool });
  return { offServers: toolset.offServers, offTools };
}

/** The choices as the panel lists them: each server, and each tool of it, once (the first). */
export function distinctChoices(choices: ToolChoices): ToolChoices {
  const servers = uniqueBy(choices.servers, (server) => server.name).map((server) => ({
    ...server,
    // A server may list a tool twice; the panel lists tools keyed by name.
    tools: uniqueBy(server.tools, (tool) => tool.name),
  }));
  return { ...choices, servers };
}

export class ToolsetController {
  choices = $state<ToolChoices | null>(null);
  error = $state<string | null>(null);
  /** The tools allowed in the conversation shown until Conduit quits ("Allow in this
   *  conversation"), as the host read them when the panel last opened. */
  allowed = $state<ConversationAllow[]>([]);
  /** The conversation whose tools are shown (null: a new chat). */
  #conversation: string | null = null;
  /** A new chat's choice, until its first message takes it along. */
  #draft: Toolset = empty();
  /** Counts reads, so an answer a newer read overtook is dropped. */
  #reads = 0;
  /** Changes run one at a time, each on what the one before left: two quick switches
   *  each built on the same old set, and the second undid the first. */
  #changes: Promise<void> = Promise.resolve();

  constructor(private readonly api: ToolsetApi) {}

  /** Shows a conversation's tools (null: a new chat starts with every tool again). */
  async show(conversation: string | null): Promise<void> {
    // Another conversation's choices are not this one's: nothing is shown (or changed
    // from them) until this one's come.
    if (conversation !== this.#conversation) {
      this.choices = null;
      this.allowed = [];
    }
    this.#conversation = conversation;
    if (conversation === null) this.#draft = empty();
    await this.refresh();
  }

  async refresh(): Promise<void> {
    const read = ++this.#reads;
    try {
      const choices =
        this.#conversation === null
          ? await this.api.toolChoices(null, this.#draft)
          : await this.api.toolChoices(this.#conversation, null);
      if (read === this.#reads) {
        this.choices = distinctChoices(choices);
        this.error = null;
      }
    } catch (e) {
      if (read === this.#reads) this.error = errorMessage(e);
    }
  }

  /** Reads again which tools are allowed in the conversation shown (none in a new chat):
   *  an answer in its turns may have added one since. */
  async refreshAllowed(): Promise<void> {
    const conversation = this.#conversation;
    if (conversation === null) {
      this.allowed = [];
      return;
    }
    try {
      const allowed = await this.api.conversationAllows(conversation);
      if (conversation === this.#conversation) this.allowed = allowed;
    } catch (e) {
      if (conversation === this.#conversation) this.error = errorMessage(e);
    }
  }

  /** Takes back a tool's allow in the conversation shown: its next call asks again. */
  async revoke(server: string, tool: string): Promise<void> {
    const conversation = this.#conversation;
    if (conversation === null) return;
    try {
      await this.api.revokeConversationAllow(conversation, server, tool);
    } catch (e) {
      if (conversation === this.#conversation) this.error = errorMessage(e);
    }
    await this.refreshAllowed();
  }

  /** What a new chat's first message takes along (null: every tool, or a saved chat). */
  forNewChat(): Toolset | null {
    if (this.#conversation !== null) return null;
    const draft = this.#draft;
    return draft.offServers.length === 0 && draft.offTools.length === 0 ? null : draft;
  }

  async setServer(server: string, on: boolean): Promise<void> {
    await this.#change((toolset) => withServer(toolset, server, on));
  }

  async setTool(server: string, tool: string, on: boolean): Promise<void> {
    await this.#change((toolset) => withTool(toolset, server, tool, on));
  }

  #change(edit: (toolset: Toolset) => Toolset): Promise<void> {
    // The conversation on screen when the switch was made: a change still queued when
    // another conversation opens is dropped, not made to that one.
    const conversation = this.#conversation;
    const run = this.#changes.then(() => this.#apply(conversation, edit));
    this.#changes = run.catch(() => {});
    return run;
  }

  async #apply(conversation: string | null, edit: (toolset: Toolset) => Toolset): Promise<void> {
    if (conversation !== this.#conversation) return;
    if (conversation === null) {
      this.#draft = edit(this.#draft);
      await this.refresh();
      return;
    }
    // The host's set for this conversation, as the last refresh read it (after the
    // change before this one).
    const current = this.choices?.toolset;
    if (!current) return;
    try {
      await this.api.setConversationToolset(conversation, edit(current));
    } catch (e) {
      this.error = errorMessage(e);
      return;
    }
    await this.refresh();
  }
}
