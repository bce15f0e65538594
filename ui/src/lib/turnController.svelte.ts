// The chat view's state and turn lifecycle, without the view: opening a conversation, paging
// older messages, a turn from send to its end, stop, approval answers, the retry countdown.
import { consentOnScreen } from "./consent";
import type * as Api from "./api";
import { commandError, errorMessage } from "./api";
import { attachedAgain, preparedAttachment, type Attachment, type Prepared } from "./composer";
import {
  applyEvent,
  editableMessage,
  emptyState,
  fromStored,
  keepAllowedBy,
  keepKeys,
  lastAnswer,
  markReplaced,
  mayAnswerAgain,
  pendingUserMessage,
  type ChatState,
} from "./turn";
import type {
  AgentEvent,
  Block,
  Decision,
  MediaRef,
  ModelChoice,
  StoredMessage,
  CommandError,
  TurnEvent,
  Toolset,
  PromptMention,
  ResourceMention,
} from "./types";

/** The servers' resources and prompt a message takes along, and how they show. */
export interface Mentioned {
  resources: ResourceMention[];
  prompt: PromptMention | null;
  labels: string[];
}

/** The commands the chat view uses, typed by api.ts (tests give typed mocks). */
export type ChatApi = Pick<
  typeof Api,
  "loadMessages" | "sendMessage" | "stopTurn" | "answerWithoutWaiting" | "answerApproval" | "storeAttachment" | "openExternal"
>;

/** The message list's scroll position, which only the page knows. */
export interface ChatScroll {
  /** Shows the newest message, once the page has drawn the change. */
  toEnd(): Promise<void>;
  /** Whether the reader is at the newest message (so new text keeps it in view). */
  atEnd(): boolean;
  /** Notes the reading position before older messages go above it; the result restores it. */
  keepPlace(): () => Promise<void>;
}

export interface ChatClock {
  now(): number;
  /** Calls `run` every `ms` until the returned function is called. */
  every(ms: number, run: () => void): () => void;
}

export interface TurnControllerOptions {
  api: ChatApi;
  /** Runs `run` before the next paint (requestAnimationFrame in the window). */
  frame: (run: () => void) => void;
  clock: ChatClock;
  scroll: ChatScroll;
  /** The conversation list may have changed (a turn started or ended). */
  onChanged: () => void;
  /** A turn started a conversation other than the one opened (a new chat got its id),
   *  while it still shows: a user who went elsewhere is not pulled back. */
  onConversationStarted: (id: string) => void;
  /** A message that was never saved gives back the resources and prompt it took (the
   *  object `send` was given). */
  onMentionsBack?: (mentions: Mentioned) => void;
}

/**
 * Messages loaded at once, when paging back, and kept in the page as a conversation goes on:
 * after each turn a reader at the newest message keeps only the newest PAGE (older ones come
 * back with "Show earlier messages"), so a long conversation does not keep every message and
 * every tool image drawn in the window.
 */
export const PAGE = 50;
/** The most messages the host gives in one load (`load_messages` clamps to it). */
export const MOST_LOADED = 500;

/** One turn, from send to its `ended` event. */
interface Run {
  /** The state its events go to, on screen or not. */
  chat: ChatState;
  /** What was typed, attached and mentioned: a turn that ends before the message is
   *  saved gives them back. */
  text: string;
  /** Images as stored, text files as the files they were read from. */
  attachments: Attachment[];
  mentions: Mentioned | null;
  /** The key of the message as shown until the stored one replaces it. */
  messageKey: string;
  /** Its conversation, once send_message answered (null if it ended before that). */
  conversation: string | null;
  ended: boolean;
  /** Events waiting for the next frame. */
  pending: AgentEvent[];
  scheduled: boolean;
  /** Its conversation's stored messages, and whether older ones exist, as they were when
   *  it was sent: put back when the user returns to it while it runs. */
  stored: StoredMessage[];
  hasOlder: boolean;
  /** The conversation it answers again (no message of its own), if it does. */
  again: string | null;
  /** It writes the last answer anew ("Answer again"), replacing it. */
  replace: boolean;
  /** The conversation whose last message of the user's its message replaces ("Edit"). */
  replaceMessage: string | null;
  /** It ended failed after saving its message. */
  failed: boolean;
}

export class TurnController {
  /** The conversation on screen (a running turn's live state when it is that one's). */
  chat = $state<ChatState>(emptyState());
  hasOlder = $state(false);
  error = $state<CommandError | null>(null);
  /** Why the last answer on screen is not all it could be (cut off, refused, the most
   *  requests one message may make); null when it is whole. */
  notice = $state<string | null>(null);
  /** The conversation whose last turn failed after its message was saved, while it shows:
   *  "Try again" answers it again without a new message. */
  #failed = $state<string | null>(null);
  /** How the stored messages on screen end (`lastAnswer`), and whose they are: what a
   *  conversation opened after its turn ended offers to try again. */
  #lastAnswer = $state<"failed" | "unanswered" | "unfinished" | null>(null);
  #storedFailed = $state<string | null>(null);
  /** The conversation on screen when its last answer, whole or stopped, can be written
   *  anew ("Answer again"). */
  #replaceable = $state<string | null>(null);
  /** The last message of the user's on screen that "Edit" can give back, and whose it is. */
  #editable = $state<{ conversation: string; id: number; text: string; attachments: Attachment[] } | null>(null);
  /** The conversation whose last message of the user's is being changed: the next message
   *  sent there takes its place. */
  editing = $state<string | null>(null);
  /** Why answers that ended while another conversation showed are not all they could be,
   *  by conversation: said when it shows again. */
  #noticesAway = new Map<string, string>();
  /** The running turn's id, once the host gave it. */
  turn = $state<string | null>(null);
  /** The composer's text and files: a message that could not be sent comes back here. */
  draftText = $state("");
  draftFiles = $state<Attachment[]>([]);
  now = $state(0);
  /** A message is on its way (its images being stored, the host not yet answering): no
   *  second one goes until it has started or been refused. */
  sending = $state(false);

  readonly #options: TurnControllerOptions;
  /** Stops the once-a-second tick; it runs only while a retry counts down, so an idle
   *  window wakes for nothing. */
  #stopClock: (() => void) | null = null;
  #stored: StoredMessage[] = [];
  #loadingOlder = false;
  /** The running turn whose id and conversation are known: it keeps taking events while
   *  another conversation is on screen. */
  #running: Run | null = null;
  /** The conversation last opened (null: a new chat). */
  #opened: string | null = null;
  /** The conversation on screen, which a new chat's first turn sets. */
  #showing = $state<string | null>(null);
  /** Counts opens, so a slow load that a newer open overtook is dropped. */
  #opens = 0;
  /** The open whose messages are still loading, if any: a message sent meanwhile waits
   *  for it, so it goes into the state of the conversation it was sent in. */
  #opening: Promise<void> | null = null;
  /** Counts sends, so a reload or a page of older messages that started before a send
   *  does not replace the state the new turn streams into. */
  #sends = 0;
  /** Turns that ended, their messages never saved, while another conversation showed:
   *  each message and error come back when its conversation shows again. */
  #unsent: { run: Run; error: CommandError | null }[] = [];
  /** The approval questions answered and not yet moved on by the host (by turn and call):
   *  a second click sends nothing. */
  answering = $state<string[]>([]);

  constructor(options: TurnControllerOptions) {
    this.#options = options;
    this.now = options.clock.now();
  }

  /** Ticks the clock while the chat on screen has a retry counting down; stops after. */
  #tickWhileCounting(): void {
    const counting = () => (this.chat.retry?.until ?? 0) > this.now;
    if (!counting() || this.#stopClock) return;
    this.#stopClock = this.#options.clock.every(1000, () => {
      this.now = this.#options.clock.now();
      if (!counting()) this.#stopTicking();
    });
  }

  #stopTicking(): void {
    this.#stopClock?.();
    this.#stopClock = null;
  }

  /** The conversation on screen (null: a new chat before its first turn started). */
  get showing(): string | null {
    return this.#showing;
  }

  get busy(): boolean {
    return this.turn !== null;
  }

  /** Whether the running turn is the conversation on screen's: its "Answering…", its
   *  Stop and Escape are there, not in another conversation opened meanwhile. */
  get answeringHere(): boolean {
    return this.busy && (this.#running === null || this.#running.chat === this.chat);
  }

  /** The provider's retry (a 429): why, and the whole seconds left; null when none. */
  get retry(): { message: string; seconds: number } | null {
    const retry = this.chat.retry;
    if (!retry || retry.until <= this.now) return null;
    return { message: retry.message, seconds: Math.ceil((retry.until - this.now) / 1000) };
  }

  destroy(): void {
    this.#stopTicking();
  }

  async open(id: string | null): Promise<void> {
    const request = ++this.#opens;
    this.#opened = id;
    this.#showing = id;
    this.error = null;
    this.notice = null;
    this.#failed = null;
    this.#lastAnswer = null;
    this.#storedFailed = null;
    this.#replaceable = null;
    this.#editable = null;
    this.editing = null;
    if (id !== null) {
      this.notice = this.#noticesAway.get(id) ?? null;
      this.#noticesAway.delete(id);
    }
    // The running turn's conversation shows its live state, approval questions included.
    const running = this.#running;
    if (id !== null && running && id === running.conversation) {
      this.chat = running.chat;
      this.#stored = running.stored;
      this.hasOlder = running.hasOlder;
      this.now = this.#options.clock.now();
      this.#tickWhileCounting();
      await this.#options.scroll.toEnd();
      return;
    }
    if (id === null) {
      this.#stored = [];
      this.chat = emptyState();
      this.hasOlder = false;
      return;
    }
    const loading = this.#options.api.loadMessages(id, null, PAGE).then(
      (loaded) => {
        if (request !== this.#opens) return;
        // Its turn started meanwhile (the host answered while this loaded): the turn's
        // live state shows, not a load from before it.
        const started = this.#running;
        if (started && started.conversation === id) {
          this.chat = started.chat;
          this.#stored = started.stored;
          this.hasOlder = started.hasOlder;
          return this.#options.scroll.toEnd();
        }
        this.#show(loaded, loaded.length === PAGE);
        for (const unsent of this.#unsent.filter((u) => u.run.conversation === id)) this.#restoreUnsent(unsent);
        return this.#options.scroll.toEnd();
      },
      (e: unknown) => {
        if (request === this.#opens) this.error = { message: errorMessage(e) };
      },
    );
    this.#opening = loading;
    try {
      await loading;
    } finally {
      if (this.#opening === loading) this.#opening = null;
    }
  }

  /** Pages back: the messages before the oldest on screen. */
  async loadOlder(): Promise<void> {
    const id = this.#opened;
    const first = this.#stored[0]?.id;
    // Not in the conversation a turn streams into (its saved messages change under it);
    // another conversation pages back while that turn runs.
    if (!id || first === undefined || this.#loadingOlder || !this.hasOlder || this.answeringHere || this.sending) return;
    this.#loadingOlder = true;
    const sends = this.#sends;
    const restorePlace = this.#options.scroll.keepPlace();
    try {
      const older = await this.#options.api.loadMessages(id, first, PAGE);
      // Another conversation opened meanwhile (or this one reloaded, or a message was
      // sent into it): the page is not put above what shows now.
      if (this.#opened !== id || this.#stored[0]?.id !== first || this.#sends !== sends) return;
      this.#show([...older, ...this.#stored], older.length === PAGE);
      await restorePlace();
    } catch (e) {
      this.error = { message: errorMessage(e) };
    } finally {
      this.#loadingOlder = false;
    }
  }

  /** Sends a message with `choice`; its events stream into the conversation it was sent in.
   *  A new chat's first message takes `toolset` along (the tools it may use); `mentions`
   *  are the servers' resources and prompt chosen for it; `viewContext` the tokens of the
   *  MCP Apps views whose context goes with it (the host holds the context). Whether the
   *  turn started. */
  async send(
    choice: ModelChoice | null,
    text: string,
    files: Attachment[],
    toolset: Toolset | null = null,
    mentions: Mentioned | null = null,
    viewContext: string[] = [],
    instructions: string | null = null,
    /** Sent from the composer: while a message of this conversation is being changed, it
     *  takes its place. A view's message never does. */
    fromComposer = false,
  ): Promise<boolean> {
    if (!choice) {
      this.error = { message: "Pick a model for this message first: the list beside Send has the models of your providers." };
      this.#giveBack(text, files);
      return false;
    }
    if (this.sending || this.busy) {
      // One message at a time (the host refuses a second into a conversation whose answer
      // is being written); the composer's Send waits, so this is a view's message.
      this.error = { message: "A message is already on its way: wait for the answer, or stop it, before sending another." };
      return false;
    }
    this.sending = true;
    this.#sends += 1;
    // Sent while a message of this conversation is being changed: it takes its place
    // (the change ends once the host saved it, in `#end`).
    const replacing = fromComposer && this.editing !== null && this.editing === this.#opened;
    try {
      return await this.#send(choice, text, files, toolset, mentions, viewContext, instructions, null, false, replacing);
    } finally {
      this.sending = false;
    }
  }

  async #send(
    choice: ModelChoice,
    text: string,
    files: Attachment[],
    toolset: Toolset | null,
    mentions: Mentioned | null,
    viewContext: string[],
    /** A new chat's instructions to the model, kept with it. */
    instructions: string | null,
    /** The conversation whose last message is answered again (no new message). */
    again: string | null = null,
    /** With `again`: the answer it had is replaced, not gone on from. */
    replace = false,
    /** The message takes the place of the last of the user's and its answer ("Edit"). */
    replaceMessage = false,
  ): Promise<boolean> {
    const { api, scroll } = this.#options;
    this.error = null;
    this.notice = null;
    this.#failed = null;
    // What the stored messages offer (Try again, Answer again) stays: a refused message
    // changes none of them, and while the turn runs nothing is offered anyway.
    // The conversation the message was sent in; its messages, if still loading, first.
    const conversation = this.#opened;
    if (this.#opening) await this.#opening;
    if (this.#opened !== conversation) {
      this.#giveBack(text, files);
      return false;
    }
    const chat = this.chat;
    const stored = this.#stored;
    const hasOlder = this.hasOlder;
    let prepared: Prepared[];
    try {
      prepared = await Promise.all(files.map((file) => preparedAttachment(file, (f) => api.storeAttachment(f))));
    } catch (e) {
      this.error = { message: `The file could not be attached: ${errorMessage(e)}` };
      this.#giveBack(text, files);
      return false;
    }
    const images = prepared.flatMap((item) => (item.type === "image" ? [item.media] : []));
    const documents = prepared.flatMap((item) => (item.type === "document" ? [item.document] : []));
    const textFiles = prepared.flatMap((item) => (item.type === "file" ? [item.file] : []));
    // The host's order: the text, the images, the PDFs, then the files.
    const blocks: Block[] = [
      ...(mentions?.labels ?? []).map((label) => ({ type: "text" as const, text: label })),
      ...(text ? [{ type: "text" as const, text }] : []),
      ...images.map((media) => ({ type: "image" as const, media })),
      ...documents.map((document) => ({ type: "document" as const, ...document })),
      ...textFiles.map((file) => ({ type: "file" as const, ...file })),
    ];
    const attachments = prepared.map((item) =>
      item.type === "image" ? item.media : item.type === "document" ? item.document : attachedAgain(item.file),
    );
    // The turn's state is the one on screen when it was sent; it keeps it if the user
    // looks elsewhere (also while its images are stored).
    const message = pendingUserMessage(blocks);
    const run: Run = {
      chat,
      text,
      attachments,
      mentions,
      messageKey: message.key,
      conversation: null,
      ended: false,
      pending: [],
      scheduled: false,
      stored,
      hasOlder,
      again,
      replace,
      replaceMessage: replaceMessage ? conversation : null,
      failed: false,
    };
    // Answering again sends no message: none shows. What it replaces folds away now.
    if (replace || replaceMessage) markReplaced(run.chat.messages, replaceMessage);
    if (again === null) run.chat.messages.push(message);
    await scroll.toEnd();
    try {
      const started = await api.sendMessage(
        {
          conversation: again ?? conversation,
          text,
          attachments: images.map((media) => media.hash),
          ...(documents.length > 0 ? { documents: documents.map(({ name, media }) => ({ name, hash: media.hash })) } : {}),
          ...(textFiles.length > 0 ? { files: textFiles } : {}),
          provider: choice.provider,
          model: choice.model,
          ...(choice.thinking ? { reasoning: choice.thinking } : {}),
          ...(toolset ? { toolset } : {}),
          ...(instructions !== null && conversation === null ? { instructions } : {}),
          ...(mentions && mentions.resources.length > 0 ? { resources: mentions.resources } : {}),
          ...(mentions?.prompt ? { prompt: mentions.prompt } : {}),
          ...(viewContext.length > 0 ? { viewContext } : {}),
          ...(again !== null ? { again: true } : {}),
          ...(replace ? { replaceAnswer: true } : {}),
          ...(replaceMessage ? { replaceMessage: true } : {}),
        },
        (event) => this.#receive(run, event),
      );
      run.conversation = started.conversation;
      if (!run.ended) {
        this.turn = started.turn;
        this.#running = run;
      }
      let onScreen = this.chat === run.chat;
      if (!onScreen && started.conversation === this.#showing) {
        // Its conversation was opened again before the host said where the turn runs:
        // it shows the turn (its Stop and questions), or, ended already, what was saved.
        if (!run.ended) {
          this.chat = run.chat;
          this.#stored = run.stored;
          this.hasOlder = run.hasOlder;
          onScreen = true;
        } else void this.#refresh(started.conversation);
      }
      if (onScreen) this.#showing = started.conversation;
      // It failed before the host said where it runs: Try again is offered now.
      if (run.ended && run.failed && onScreen) this.#failed = started.conversation;
      if (run.ended && onScreen) void this.#refresh(started.conversation).then(() => scroll.toEnd());
      // A user who opened another conversation meanwhile stays there: the new one is in
      // the list (onChanged), and opening it shows the running turn.
      if (started.conversation !== conversation && onScreen) this.#options.onConversationStarted(started.conversation);
      this.#options.onChanged();
      return true;
    } catch (e) {
      // Refused before anything was saved: the message goes back into the composer.
      this.error = commandError(e);
      if (again !== null) {
        // Refused before it started: nothing was replaced (what shows folded comes back),
        // and it can be tried once more.
        if (replace) void this.#refresh(again);
        else this.#failed = again;
        return false;
      }
      run.chat.messages.pop();
      this.#giveBack(text, files);
      // Nothing was replaced: what folded away shows as it was again.
      if (replaceMessage && conversation !== null) void this.#refresh(conversation);
      return false;
    }
  }

  /** Asks the host to stop the turn running in the conversation on screen; false when
   *  there is none (one running in another conversation is stopped from there). */
  stop(): boolean {
    const turn = this.turn;
    if (!turn || !this.answeringHere) return false;
    void this.#options.api.stopTurn(turn).catch((e: unknown) => (this.error = { message: errorMessage(e) }));
    return true;
  }

  /** The servers the turn on screen waits for to start (none when it does not wait). */
  get startingServers(): string[] {
    return this.answeringHere ? this.chat.starting : [];
  }

  /** Asks the host to begin the turn on screen without the servers still starting. */
  answerWithoutWaiting(): void {
    const turn = this.turn;
    if (!turn || !this.answeringHere) return;
    void this.#options.api
      .answerWithoutWaiting(turn)
      .catch((e: unknown) => (this.error = { message: errorMessage(e) }));
  }

  /** Answers the approval question about `callId`, once: until the host moves the call on
   *  (its next event), another click on its buttons sends nothing. */
  answer(callId: string, decision: Decision): void {
    const turn = this.turn;
    if (!turn) return;
    const key = `${turn}\u0000${callId}`;
    if (this.answering.includes(key)) return;
    this.answering = [...this.answering, key];
    const done = () => (this.answering = this.answering.filter((k) => k !== key));
    this.#options.api
      .answerApproval(turn, callId, decision)
      .then((waiting) => {
        if (!waiting) {
          done();
          this.error = { message: "That tool call is no longer waiting for an answer." };
        }
      })
      .catch((e: unknown) => {
        // Not answered: its buttons work again.
        done();
        this.error = { message: errorMessage(e) };
      });
  }

  /** Whether the approval question about `callId` was answered and waits for the host. */
  answered(callId: string): boolean {
    return this.turn !== null && this.answering.includes(`${this.turn}\u0000${callId}`);
  }

  openLink(url: string): void {
    this.#options.api.openExternal(url).catch((e: unknown) => (this.error = { message: errorMessage(e) }));
  }

  /** Shows an error the view met (e.g. adding a local provider failed). */
  fail(message: string): void {
    this.error = { message };
  }

  dismissError(): void {
    this.error = null;
    this.#failed = null;
  }

  /** Whether the conversation on screen can answer its last message again: its last turn
   *  failed after saving it, and nothing runs. */
  get canTryAgain(): boolean {
    if (this.busy || this.sending || this.#showing === null) return false;
    return this.#failed === this.#showing || this.#storedFailed === this.#showing;
  }

  /** Whether the error on screen is the failed turn's, with its Try again. */
  get tryAgainWithError(): boolean {
    return this.canTryAgain && this.error !== null && this.#failed === this.#showing;
  }

  /** Answers the conversation's last message again, with the model picked now, after a
   *  turn that failed: nothing new is sent, and what the failed turn kept stays above. */
  tryAgain(choice: ModelChoice | null): Promise<boolean> {
    return this.canTryAgain ? this.#answerAgain(choice, false) : Promise.resolve(false);
  }

  /** Answers the conversation on screen's last message again with `choice`, going on
   *  from what it has (`replace` false) or writing its answer anew. */
  async #answerAgain(choice: ModelChoice | null, replace: boolean): Promise<boolean> {
    if (!choice) {
      this.error = { message: "Pick a model first: the list beside Send has the models of your providers." };
      return false;
    }
    const conversation = this.#showing;
    this.sending = true;
    this.#sends += 1;
    try {
      return await this.#send(choice, "", [], null, null, [], null, conversation, replace);
    } finally {
      this.sending = false;
    }
  }

  /** What the chat says of a last answer that can be tried again when no error says it
   *  (the conversation was opened after its turn ended); null when there is none. */
  get unansweredNotice(): string | null {
    if (!this.canTryAgain || this.tryAgainWithError) return null;
    if (this.#lastAnswer === "unanswered") return "The last message has no answer.";
    if (this.#lastAnswer === "unfinished") return "The answer stopped after its tool results.";
    return "The last answer did not finish.";
  }

  /** Whether the last answer on screen, whole or stopped, can be written anew. */
  get canAnswerAgain(): boolean {
    return !this.busy && !this.sending && this.#showing !== null && this.#replaceable === this.#showing;
  }

  /** Writes the last answer anew with the model picked now: the one it had stays, folded
   *  and marked replaced, and the model no longer reads it. */
  answerAgain(choice: ModelChoice | null): Promise<boolean> {
    return this.canAnswerAgain ? this.#answerAgain(choice, true) : Promise.resolve(false);
  }

  /** The id of the message of the user's that "Edit" can give back (null: none now). */
  get editableId(): number | null {
    if (this.busy || this.sending || this.editing !== null) return null;
    const editable = this.#editable;
    return editable !== null && editable.conversation === this.#showing ? editable.id : null;
  }

  /** Gives the last message of the user's back to the composer, before whatever was typed
   *  there (which is kept), to be changed: the next message sent here takes its place and
   *  its answer's (both kept, folded). */
  edit(): void {
    const editable = this.#editable;
    if (this.editableId === null || editable === null) return;
    this.#giveBack(editable.text, editable.attachments);
    this.editing = editable.conversation;
  }

  /** Stops changing the message: the next one sent is a new message (the composer keeps
   *  what it holds). */
  cancelEdit(): void {
    this.editing = null;
  }

  dismissNotice(): void {
    this.notice = null;
  }

  /** Puts a message that was not sent back into the composer, before whatever the user
   *  typed or attached since (which is kept). */
  #giveBack(text: string, files: Attachment[]): void {
    const typed = this.draftText;
    this.draftText = typed.trim() === "" ? text : text === "" ? typed : `${text}\n\n${typed}`;
    this.draftFiles = [...files, ...this.draftFiles];
  }

  #show(stored: StoredMessage[], hasOlder: boolean): void {
    this.#stored = stored;
    // A conversation whose last answer failed, or whose last message has none, can be
    // answered again, however long ago that was (also after a restart).
    this.#lastAnswer = lastAnswer(stored);
    this.#storedFailed = this.#lastAnswer !== null ? this.#showing : null;
    this.#replaceable = mayAnswerAgain(stored) ? this.#showing : null;
    const editable = editableMessage(stored);
    this.#editable = editable && this.#showing !== null ? { conversation: this.#showing, ...editable } : null;
    const next = fromStored(stored);
    keepKeys(this.chat.messages, next.messages);
    keepAllowedBy(this.chat, next);
    this.chat = next;
    this.hasOlder = hasOlder;
  }

  /**
   * Reloads a conversation after its turn ended. A reader at the newest message gets the
   * newest PAGE (the window moves on and drops what went out of it); one reading further up
   * keeps what is loaded, with room for the turn's new messages, so nothing moves under them
   * (up to the MOST_LOADED the host gives at once: a reader further back keeps that many of
   * the newest, and pages back again from there).
   */
  async #refresh(id: string): Promise<void> {
    // The host gives at most MOST_LOADED at once: asking for more, a full answer would
    // read as the conversation's start, and older messages could not be loaded again.
    const count = this.#options.scroll.atEnd()
      ? PAGE
      : Math.min(MOST_LOADED, Math.max(PAGE, this.#stored.length + 4));
    const sends = this.#sends;
    try {
      const loaded = await this.#options.api.loadMessages(id, null, count);
      // Another conversation shows, or a message was sent meanwhile: its turn streams into
      // the state on screen, which this must not replace.
      if (this.#showing !== id || this.#sends !== sends) return;
      this.#show(loaded, loaded.length === count);
    } catch (e) {
      this.error = { message: errorMessage(e) };
    }
  }

  #receive(run: Run, event: TurnEvent): void {
    if (event.type === "agent") {
      // Applied once per frame, not one by one: a fast stream sends hundreds of events a
      // second, and each application re-renders.
      run.pending.push(event.event);
      if (!run.scheduled) {
        run.scheduled = true;
        this.#options.frame(() => this.#flush(run));
      }
      return;
    }
    if (event.type === "servers_starting") {
      run.chat.starting = event.servers;
      return;
    }
    this.#end(run, event);
  }

  #flush(run: Run): void {
    run.scheduled = false;
    const events = run.pending;
    run.pending = [];
    const onScreen = this.chat === run.chat;
    const atEnd = this.#options.scroll.atEnd();
    this.now = this.#options.clock.now();
    for (const event of events) applyEvent(run.chat, event, this.now);
    this.#tickWhileCounting();
    if (onScreen && atEnd && !consentOnScreen()) void this.#options.scroll.toEnd();
  }

  #end(run: Run, event: Extract<TurnEvent, { type: "ended" }>): void {
    this.#flush(run);
    run.ended = true;
    run.chat.starting = [];
    const finished = run.conversation;
    if (this.#running === run) this.#running = null;
    this.turn = null;
    this.answering = [];
    this.#options.onChanged();
    if (!event.saved && run.again !== null) {
      // Answering again was refused or stopped before it began: nothing to give back, and
      // it can be tried once more.
      if (this.chat !== run.chat) return;
      if (event.error) this.error = event.error;
      if (run.replace) void this.#refresh(run.again);
      else this.#failed = run.again;
      return;
    }
    if (!event.saved) {
      // Refused or stopped before its message was saved (a mentioned resource still
      // being read): the message goes back, now or when its conversation shows again.
      const unsent = { run, error: event.error ?? null };
      this.#unsent.push(unsent);
      if (this.chat === run.chat) this.#restoreUnsent(unsent);
      // A change refused: nothing was replaced (what folded shows again), and the
      // message is still being changed.
      const changed = run.replaceMessage;
      if (changed !== null && this.#showing === changed) {
        this.editing = changed;
        void this.#refresh(changed);
      }
      return;
    }
    // A change saved: it took the place of the message.
    if (run.replaceMessage !== null && this.editing === run.replaceMessage) this.editing = null;
    if (this.chat !== run.chat) {
      if (finished && finished === this.#showing) {
        // Its conversation was opened again while the host had not yet said where the
        // turn runs: what shows is a load from before the answer, read again now.
        if (event.notice) this.notice = event.notice;
        void this.#refresh(finished);
        return;
      }
      // Its failed answer shows when the conversation does (from what was stored); why
      // it was cut short is said then.
      if (event.notice && finished) this.#noticesAway.set(finished, event.notice);
      return;
    }
    if (event.error) this.error = event.error;
    if (event.notice) this.notice = event.notice;
    // What the stored messages offered is read again with them (the refresh below).
    this.#storedFailed = null;
    this.#replaceable = null;
    this.#editable = null;
    run.failed = event.status === "error";
    if (run.failed && finished) this.#failed = finished;
    if (!finished) return; // ended before send_message answered: send() refreshes
    void this.#refresh(finished).then(() => this.#options.scroll.toEnd());
  }

  /** Gives back the message of a turn that saved nothing, with its error: its text before
   *  what was typed since, its images and mentions; it leaves the page. */
  #restoreUnsent(unsent: { run: Run; error: CommandError | null }): void {
    this.#unsent = this.#unsent.filter((u) => u !== unsent);
    const { run, error } = unsent;
    run.chat.messages = run.chat.messages.filter((m) => m.key !== run.messageKey);
    if (error) this.error = error;
    this.#giveBack(run.text, run.attachments);
    if (run.mentions) this.#options.onMentionsBack?.(run.mentions);
  }
}
