import { describe, expect, it, vi } from "vitest";
import { ConversationList } from "./conversationList.svelte";
import type { Conversation } from "./types";

function conversation(i: number): Conversation {
  return { id: `c${i}`, title: `Chat ${i}`, provider: null, model: null, createdAt: i, updatedAt: i, messageCount: 2, pinned: false };
}

describe("the sidebar's conversation list", () => {
  it("lists the newest page, and a page more each time older ones are asked for, until all are listed", async () => {
    const stored = Array.from({ length: 7 }, (_, i) => conversation(i));
    const list = vi.fn((count: number) => Promise.resolve(stored.slice(0, count)));
    const conversations = new ConversationList(list, 3);
    await conversations.refresh();
    expect(list).toHaveBeenLastCalledWith(3);
    expect(conversations.conversations.map((c) => c.id)).toEqual(["c0", "c1", "c2"]);
    expect(conversations.hasOlder).toBe(true);
    await conversations.showOlder();
    expect(list).toHaveBeenLastCalledWith(6);
    expect(conversations.hasOlder).toBe(true);
    await conversations.showOlder();
    expect(conversations.conversations).toHaveLength(7);
    expect(conversations.hasOlder).toBe(false);
    // A refresh keeps what was shown.
    await conversations.refresh();
    expect(list).toHaveBeenLastCalledWith(9);
  });

  it("passes a refusal on and keeps what it listed", async () => {
    const list = vi.fn<(count: number) => Promise<Conversation[]>>();
    list.mockResolvedValueOnce([conversation(1)]).mockRejectedValueOnce(new Error("database is locked"));
    const conversations = new ConversationList(list, 3);
    await conversations.refresh();
    await expect(conversations.refresh()).rejects.toThrow("database is locked");
    expect(conversations.conversations.map((c) => c.id)).toEqual(["c1"]);
    expect(conversations.hasOlder).toBe(false);
  });

  it("keeps the newest listing when an older one answers last", async () => {
    let answerOld: (value: Conversation[]) => void = () => {};
    const list = vi.fn<(count: number) => Promise<Conversation[]>>();
    list.mockImplementationOnce(() => new Promise((resolve) => (answerOld = resolve)));
    list.mockResolvedValueOnce([conversation(2)]);
    const conversations = new ConversationList(list, 3);
    const slow = conversations.refresh();
    await conversations.refresh();
    // The older listing still had a conversation deleted since.
    answerOld([conversation(2), conversation(1)]);
    await slow;
    expect(conversations.conversations.map((c) => c.id)).toEqual(["c2"]);
  });
});
