import { describe, expect, it, vi } from "vitest";
import type { EventBatch, WindowEvent } from "./bindings";
import { WindowEvents } from "./windowEvents";

/** A host whose answers the test gives one at a time; it records what each pull asked after. */
function scriptedHost() {
  const asked: number[] = [];
  const answers: Array<(batch: EventBatch | Error) => void> = [];
  const pull = (after: number) =>
    new Promise<EventBatch>((resolve, reject) => {
      asked.push(after);
      answers.push((batch) => (batch instanceof Error ? reject(batch) : resolve(batch)));
    });
  return {
    pull,
    asked,
    /** Answers the pull waiting now. */
    async answer(events: WindowEvent[] | Error, next = 0): Promise<void> {
      await vi.waitFor(() => expect(answers.length).toBeGreaterThan(0));
      const respond = answers.shift();
      respond?.(events instanceof Error ? events : { events, next });
      // Let the pump take the answer and ask again.
      await vi.waitFor(() => expect(answers.length).toBeGreaterThan(0));
    },
  };
}

describe("WindowEvents", () => {
  it("does not ask the host until someone listens", async () => {
    const host = scriptedHost();
    const events = new WindowEvents(host.pull);
    await Promise.resolve();
    expect(host.asked).toEqual([]);
    events.on("mcpServers", () => {});
    await vi.waitFor(() => expect(host.asked).toEqual([0]));
  });

  it("hands notices to their listeners and asks after the last number it had", async () => {
    const host = scriptedHost();
    const events = new WindowEvents(host.pull);
    const servers = vi.fn();
    const providers = vi.fn();
    const stopServers = events.on("mcpServers", servers);
    events.on("providersChanged", providers);
    await host.answer([{ kind: "mcpServers" }, { kind: "providersChanged" }], 2);
    expect(servers).toHaveBeenCalledTimes(1);
    expect(providers).toHaveBeenCalledTimes(1);
    expect(host.asked).toEqual([0, 2]);

    stopServers();
    await host.answer([{ kind: "mcpServers" }], 3);
    expect(servers).toHaveBeenCalledTimes(1);
    expect(host.asked).toEqual([0, 2, 3]);
  });

  it("routes each stream's messages in order and forgets a stream that ended", async () => {
    const host = scriptedHost();
    const events = new WindowEvents(host.pull);
    const first: string[] = [];
    const second: string[] = [];
    const a = events.openStream<string>((m) => first.push(m));
    const b = events.openStream<string>((m) => second.push(m));
    expect(a).not.toBe(b);
    expect(events.openStreams).toBe(2);
    await host.answer(
      [
        { kind: "stream", stream: a, message: "one" },
        { kind: "stream", stream: b, message: "other" },
        { kind: "stream", stream: a, message: "two" },
        { kind: "streamEnded", stream: a },
        // After its end, and one the page never opened: dropped.
        { kind: "stream", stream: a, message: "late" },
        { kind: "stream", stream: 999, message: "stranger" },
      ],
      6,
    );
    expect(first).toEqual(["one", "two"]);
    expect(second).toEqual(["other"]);
    expect(events.openStreams).toBe(1);
  });

  it("forgets a stream whose command was refused", async () => {
    const host = scriptedHost();
    const events = new WindowEvents(host.pull);
    const heard: string[] = [];
    const refused = events.openStream<string>((m) => heard.push(m));
    events.closeStream(refused);
    expect(events.openStreams).toBe(0);
    await host.answer([{ kind: "stream", stream: refused, message: "never shown" }], 1);
    expect(heard).toEqual([]);
  });

  it("asks again after a failed request, from where it was, and loses nothing", async () => {
    const host = scriptedHost();
    const waits: number[] = [];
    const events = new WindowEvents(host.pull, async (ms) => {
      waits.push(ms);
    });
    const heard = vi.fn();
    events.on("mcpQuestions", heard);
    await host.answer([{ kind: "mcpQuestions" }], 4);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    await host.answer(new Error("the app is busy"));
    expect(warn).toHaveBeenCalled();
    warn.mockRestore();
    expect(waits).toEqual([1000]);
    expect(host.asked).toEqual([0, 4, 4]);
    await host.answer([{ kind: "mcpQuestions" }], 5);
    expect(heard).toHaveBeenCalledTimes(2);
  });

  it("asks again when an answer never comes", async () => {
    const asked: number[] = [];
    let calls = 0;
    const pull = (after: number) => {
      asked.push(after);
      calls += 1;
      // The first request is lost on the way; the second is answered; later ones wait.
      return calls === 2
        ? Promise.resolve({ events: [{ kind: "mcpServers" } as WindowEvent], next: 1 })
        : new Promise<EventBatch>(() => {});
    };
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    let retries = 0;
    // The pump waits before asking again after the lost answer; after the next one it
    // stays waiting, so the test leaves nothing running.
    const wait = () => (retries++ === 0 ? Promise.resolve() : new Promise<void>(() => {}));
    const events = new WindowEvents(pull, wait, 10);
    const heard = vi.fn();
    events.on("mcpServers", heard);
    await vi.waitFor(() => expect(heard).toHaveBeenCalled());
    expect(asked.slice(0, 2)).toEqual([0, 0]);
    warn.mockRestore();
  });

  it("keeps going when a listener throws", async () => {
    const host = scriptedHost();
    const events = new WindowEvents(host.pull);
    const error = vi.spyOn(console, "error").mockImplementation(() => {});
    events.on("mcpServers", () => {
      throw new Error("a broken listener");
    });
    const after = vi.fn();
    events.on("providersChanged", after);
    await host.answer([{ kind: "mcpServers" }, { kind: "providersChanged" }], 2);
    expect(after).toHaveBeenCalledTimes(1);
    expect(error).toHaveBeenCalled();
    error.mockRestore();
    expect(host.asked).toEqual([0, 2]);
  });
});
