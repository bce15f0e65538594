// The composer's instructions panel without the view: the conversation on screen's
// instructions to the model (its system prompt). A new chat's are held here and sent with
// its first message; a saved conversation's are kept by the host and apply from its next
// turn.
import type * as Api from "./api";
import { errorMessage } from "./api";

/** The commands the panel uses, typed by api.ts (tests give typed mocks). */
export type InstructionsApi = Pick<typeof Api, "conversationInstructions" | "setConversationInstructions">;

/** The most characters the host keeps (`MAX_INSTRUCTIONS`). */
export const MAX_INSTRUCTIONS = 20_000;

export class InstructionsController {
  /** What the panel edits. */
  text = $state("");
  /** What applies: the host's for a saved conversation, the held draft for a new chat. */
  saved = $state("");
  error = $state<string | null>(null);
  /** The conversation shown (null: a new chat). */
  #conversation = $state<string | null>(null);
  /** Counts reads, so an answer a newer read overtook is dropped. */
  #reads = 0;

  constructor(private readonly api: InstructionsApi) {}

  /** Shows a conversation's instructions (null: a new chat starts without any). */
  async show(conversation: string | null): Promise<void> {
    const read = ++this.#reads;
    this.#conversation = conversation;
    this.error = null;
    // Nothing of the conversation shown before stays meanwhile (or if the read fails):
    // a Save must never write it into this one.
    this.text = "";
    this.saved = "";
    if (conversation === null) return;
    try {
      const kept = await this.api.conversationInstructions(conversation);
      if (read !== this.#reads) return;
      this.text = kept;
      this.saved = kept;
    } catch (e) {
      if (read === this.#reads) this.error = errorMessage(e);
    }
  }

  /** Whether instructions apply: a saved conversation's as kept, a new chat's as typed
   *  (its first message takes them along, saved or not). */
  get active(): boolean {
    return (this.#conversation === null ? this.text : this.saved).trim() !== "";
  }

  get changed(): boolean {
    return this.text !== this.saved;
  }

  get tooLong(): boolean {
    return [...this.text].length > MAX_INSTRUCTIONS;
  }

  /** Keeps what the panel holds; false (with the reason in `error`) when it was not. */
  async save(): Promise<boolean> {
    if (this.tooLong) {
      this.error = `At most ${MAX_INSTRUCTIONS.toLocaleString("en")} characters: they go with every request.`;
      return false;
    }
    const text = this.text;
    const conversation = this.#conversation;
    this.error = null;
    if (conversation === null) {
      this.saved = text;
      return true;
    }
    try {
      await this.api.setConversationInstructions(conversation, text);
      if (this.#conversation === conversation) this.saved = text;
      return true;
    } catch (e) {
      this.error = errorMessage(e);
      return false;
    }
  }

  /** The instructions a new chat's first message takes along: what the panel holds,
   *  saved or only typed (a user who typed them and sent meant them; the host refuses
   *  too many characters, and the message comes back). Null when blank, or not a new chat. */
  forNewChat(): string | null {
    return this.#conversation === null && this.text.trim() !== "" ? this.text : null;
  }
}
