// The window's events: one request at a time asks the host for what happened since the last
// answer (it waits until something does), then hands each event to whoever listens.
//
// The host never evaluates a script in the page: Tauri's events and channels do, and
// WebKitGTK keeps a JavaScript engine running in the app's process for them.
import type { EventBatch, WindowEvent } from "./bindings";
// commands.ts imports this module for its streams; each side uses the other only in calls.
import { nextWindowEvents } from "./commands";

/** The changes a window answers by asking again (they carry nothing). */
export type WindowNotice = Exclude<WindowEvent["kind"], "stream" | "streamEnded">;

/** Asks for the events after number `after`; the host answers when there are some. */
export type Pull = (after: number) => Promise<EventBatch>;

/** How long the pump waits before asking again after a failed request. */
export const RETRY_MS = 1000;

/**
 * How long the pump waits for an answer before it asks again: the host answers within
 * 25 s even with nothing to say, so a request still open after this was lost on the way.
 * Asking again loses nothing: the host forgets events only once asked after them.
 */
export const PATIENCE_MS = 40_000;

/** Routes one window's events: notices to their listeners, stream messages to their stream. */
export class WindowEvents {
  readonly #pull: Pull;
  readonly #wait: (ms: number) => Promise<void>;
  readonly #listeners = new Map<WindowNotice, Set<() => void>>();
  readonly #streams = new Map<number, (message: unknown) => void>();
  // Numbered from a random start: a turn that a page left running when it reloaded still
  // sends on its old number, which the new page must not have given to a new stream.
  #nextStream = 1 + ((crypto.getRandomValues(new Uint32Array(1))[0] ?? 0) % 0x4000_0000);
  #after = 0;
  #pumping = false;

  readonly #patienceMs: number;

  constructor(pull: Pull, wait: (ms: number) => Promise<void> = delay, patienceMs = PATIENCE_MS) {
    this.#pull = pull;
    this.#wait = wait;
    this.#patienceMs = patienceMs;
  }

  /** Calls `listener` on every `notice` until the returned function is called. */
  on(notice: WindowNotice, listener: () => void): () => void {
    let listeners = this.#listeners.get(notice);
    if (!listeners) {
      listeners = new Set();
      this.#listeners.set(notice, listeners);
    }
    const entry = () => listener();
    listeners.add(entry);
    this.#start();
    return () => {
      listeners.delete(entry);
    };
  }

  /**
   * A new stream's number, for a command to send `onMessage` its messages on; it is
   * forgotten when the host says the stream ended.
   */
  openStream<T>(onMessage: (message: T) => void): number {
    const stream = this.#nextStream++;
    this.#streams.set(stream, (message) => onMessage(message as T));
    this.#start();
    return stream;
  }

  /** Forgets a stream (its command was refused: nothing comes on it). */
  closeStream(stream: number): void {
    this.#streams.delete(stream);
  }

  /** How many streams are open (for tests). */
  get openStreams(): number {
    return this.#streams.size;
  }

  #start(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    void this.#pump();
  }

  async #pump(): Promise<void> {
    for (;;) {
      let batch: EventBatch;
      try {
        batch = await within(this.#pull(this.#after), this.#patienceMs);
      } catch (e) {
        // The host is there for as long as the page is: a failure is passing (the app
        // starting or busy). Asking again later loses nothing: the host keeps the events
        // until they are asked for after.
        console.warn("the window's events could not be fetched; asking again", e);
        await this.#wait(RETRY_MS);
        continue;
      }
      this.#after = batch.next;
      for (const event of batch.events) this.#dispatch(event);
    }
  }

  #dispatch(event: WindowEvent): void {
    switch (event.kind) {
      case "stream": {
        const onMessage = this.#streams.get(event.stream);
        if (onMessage) guarded(() => onMessage(event.message));
        break;
      }
      case "streamEnded":
        this.#streams.delete(event.stream);
        break;
      default:
        for (const listener of [...(this.#listeners.get(event.kind) ?? [])]) guarded(listener);
    }
  }
}

/** Runs one listener: its failure must not stop the others or the window's events. */
function guarded(listener: () => void): void {
  try {
    listener();
  } catch (e) {
    console.error("a window event's listener failed", e);
  }
}

/** `answer`, or a rejection if it takes longer than `ms`. */
function within<T>(answer: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([answer, late]).finally(() => clearTimeout(timer));
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

let events: WindowEvents | null = null;

/** This page's events, pulled through the generated `nextWindowEvents` wrapper. */
function windowEvents(): WindowEvents {
  events ??= new WindowEvents((after) => nextWindowEvents(after));
  return events;
}

/** Calls `listener` whenever the host sends `notice`, until the returned function is called. */
export function onWindowEvent(notice: WindowNotice, listener: () => void): () => void {
  return windowEvents().on(notice, listener);
}

/** A new stream's number for a command's messages (the generated wrappers call this). */
export function openStream<T>(onMessage: (message: T) => void): number {
  return windowEvents().openStream(onMessage);
}

/**
 * For a command's rejection: forgets its `streams` (refused before the host took them,
 * they would never end) and rejects with the same error.
 */
export function forgetStreams(...streams: number[]): (error: unknown) => never {
  return (error) => {
    for (const stream of streams) windowEvents().closeStream(stream);
    throw error;
  };
}
