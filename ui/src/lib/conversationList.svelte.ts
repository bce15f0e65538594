// The sidebar's list of conversations: the newest CONVERSATIONS_PAGE, and that many more
// each time the user shows older ones (the host lists at most 20,000; search reaches all).
import type { Conversation } from "./types";

export const CONVERSATIONS_PAGE = 500;

export class ConversationList {
  /** Newest first. */
  conversations = $state<Conversation[]>([]);
  /** How many are asked for. */
  #count: number;
  readonly #page: number;
  readonly #list: (count: number) => Promise<Conversation[]>;

  constructor(list: (count: number) => Promise<Conversation[]>, page = CONVERSATIONS_PAGE) {
    this.#list = list;
    this.#page = page;
    this.#count = page;
  }

  /** Whether more exist than are listed: the list came back full. */
  get hasOlder(): boolean {
    return this.conversations.length >= this.#count;
  }

  /** Counts listings: one that a newer listing overtook (a turn's start and end, a
   *  rename, a deletion each list again) is dropped, so a deleted conversation is not
   *  listed again, nor a new one hidden, by an older answer coming last. */
  #reads = 0;

  /** Lists them again (a conversation started, renamed or deleted); a refusal is thrown. */
  async refresh(): Promise<void> {
    const read = ++this.#reads;
    const listed = await this.#list(this.#count);
    if (read === this.#reads) this.conversations = listed;
  }

  /** Lists a page more of older ones. */
  async showOlder(): Promise<void> {
    this.#count += this.#page;
    await this.refresh();
  }
}
