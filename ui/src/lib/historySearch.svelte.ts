// The sidebar's search through the history: typed text searched after a pause, and only
// the answer to the newest text shown (a slow answer to older text must not replace a
// newer one's).
import { errorMessage } from "./api";
import type { SearchHit } from "./types";

/** How long typing pauses before the history is searched. */
export const SEARCH_PAUSE_MS = 150;

export interface SearchTimers {
  set: (run: () => void, ms: number) => unknown;
  clear: (timer: unknown) => void;
}

const browserTimers: SearchTimers = {
  set: (run, ms) => setTimeout(run, ms),
  clear: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout>),
};

export class HistorySearch {
  /** The hits for the text typed, or null when nothing is typed (the list shows). */
  hits = $state<SearchHit[] | null>(null);
  /** Why the last search failed, shown instead of its hits. */
  error = $state<string | null>(null);

  readonly #search: (text: string) => Promise<SearchHit[]>;
  readonly #timers: SearchTimers;
  #timer: unknown = null;
  /** Counts what was typed, so only the newest text's answer is shown. */
  #typed = 0;

  constructor(search: (text: string) => Promise<SearchHit[]>, timers: SearchTimers = browserTimers) {
    this.#search = search;
    this.#timers = timers;
  }

  /** Searches `query` once typing pauses; an empty one shows the list again at once. */
  typed(query: string): void {
    this.#stopTimer();
    const typed = ++this.#typed;
    const text = query.trim();
    if (text === "") {
      this.hits = null;
      this.error = null;
      return;
    }
    this.#timer = this.#timers.set(() => {
      this.#timer = null;
      this.#search(text).then(
        (hits) => {
          if (typed !== this.#typed) return;
          this.hits = hits;
          this.error = null;
        },
        (e: unknown) => {
          if (typed !== this.#typed) return;
          this.hits = [];
          this.error = errorMessage(e);
        },
      );
    }, SEARCH_PAUSE_MS);
  }

  /** Forgets the search (Escape): the list shows, and no answer on its way replaces it. */
  clear(): void {
    this.typed("");
  }

  destroy(): void {
    this.#stopTimer();
  }

  #stopTimer(): void {
    if (this.#timer !== null) this.#timers.clear(this.#timer);
    this.#timer = null;
  }
}
