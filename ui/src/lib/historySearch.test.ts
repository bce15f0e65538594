// The sidebar's search without a DOM: a fake search command and timers run by hand.
import { describe, expect, it, vi } from "vitest";
import { HistorySearch, SEARCH_PAUSE_MS, type SearchTimers } from "./historySearch.svelte";
import type { SearchHit } from "./types";

function hit(title: string): SearchHit {
  return { conversationId: `c-${title}`, messageId: 1, title, snippet: title, createdAt: 0 };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((done, fail) => ((resolve = done), (reject = fail)));
  return { promise, resolve, reject };
}

function setup() {
  const pending: { run: () => void; ms: number; cleared: boolean }[] = [];
  const timers: SearchTimers = {
    set: (run, ms) => {
      const timer = { run, ms, cleared: false };
      pending.push(timer);
      return timer;
    },
    clear: (timer) => ((timer as { cleared: boolean }).cleared = true),
  };
  const search = vi.fn<(text: string) => Promise<SearchHit[]>>();
  const history = new HistorySearch(search, timers);
  /** Runs the timers still set, as the pause ending would. */
  const pause = () => {
    for (const timer of pending.splice(0)) if (!timer.cleared) timer.run();
  };
  return { history, search, pause, pending };
}

describe("the sidebar's history search", () => {
  it("searches once typing pauses, for the last text typed", async () => {
    const t = setup();
    t.search.mockResolvedValue([hit("Q3 plans")]);
    t.history.typed("Q");
    t.history.typed("Q3 ");
    expect(t.search).not.toHaveBeenCalled();
    expect(t.pending.every((timer) => timer.ms === SEARCH_PAUSE_MS)).toBe(true);
    t.pause();
    expect(t.search).toHaveBeenCalledTimes(1);
    expect(t.search).toHaveBeenCalledWith("Q3");
    await vi.waitFor(() => expect(t.history.hits).toEqual([hit("Q3 plans")]));
  });

  it("shows only the newest text's answer when an older one comes back later", async () => {
    const t = setup();
    const slow = deferred<SearchHit[]>();
    const fast = deferred<SearchHit[]>();
    t.search.mockReturnValueOnce(slow.promise).mockReturnValueOnce(fast.promise);
    t.history.typed("budget");
    t.pause();
    t.history.typed("budget 2026");
    t.pause();
    fast.resolve([hit("2026 budget")]);
    await vi.waitFor(() => expect(t.history.hits).toEqual([hit("2026 budget")]));
    slow.resolve([hit("old budget")]);
    await slow.promise;
    await Promise.resolve();
    expect(t.history.hits).toEqual([hit("2026 budget")]);
  });

  it("clears at once, and no search already on its way brings results back", async () => {
    const t = setup();
    const answer = deferred<SearchHit[]>();
    t.search.mockReturnValueOnce(answer.promise);
    t.history.typed("chart");
    t.history.clear();
    t.pause();
    expect(t.search).not.toHaveBeenCalled();
    t.history.typed("chart");
    t.pause();
    t.history.clear();
    answer.resolve([hit("chart")]);
    await answer.promise;
    await Promise.resolve();
    expect(t.history.hits).toBeNull();
  });

  it("says why a search failed, in the host's words, even the first one", async () => {
    const t = setup();
    t.search.mockRejectedValueOnce({ message: "database is locked" });
    t.history.typed("anything");
    t.pause();
    await vi.waitFor(() => expect(t.history.error).toBe("database is locked"));
    expect(t.history.hits).toEqual([]);
    t.search.mockResolvedValueOnce([hit("anything")]);
    t.history.typed("anything ");
    t.pause();
    await vi.waitFor(() => expect(t.history.error).toBeNull());
    expect(t.history.hits).toEqual([hit("anything")]);
  });
});
