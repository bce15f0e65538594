// The chat's turn lifecycle without a DOM: a typed fake Api, frames, a clock and a scroll
// position run by hand. Nothing is rendered; the test keeps the default (browser-like)
// environment only because Svelte compiles runes for the browser there, as in the window
// (under `node` it compiles the server version, whose state is not reactive).
import { describe, expect, it, vi, type Mock } from "vitest";
import { commandError } from "./api";
import { armedAfter } from "./consent";
import { MOST_LOADED, PAGE, TurnController, type ChatApi } from "./turnController.svelte";
import type { AgentEvent, MediaRef, StoredMessage, ToolCall, TurnEvent } from "./types";

type FakeApi = { [Name in keyof ChatApi]: Mock<ChatApi[Name]> };

const choice = { provider: "claude", model: "claude-sonnet" };

function refuse(name: string) {
  return () => Promise.reject(new Error(`unexpected command ${name}`));
}

function stored(id: number, role: StoredMessage["role"], text: string, status: StoredMessage["status"] = "complete"): StoredMessage {
  return { id, role, status, error: null, usage: null, createdAt: 0, blocks: [{ type: "text", text }] };
}

/** A promise the test settles when it wants to. */
function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => (resolve = done));
  return { promise, resolve };
}

function setup(extra: { onMentionsBack?: (mentions: unknown) => void } = {}) {
  const api: FakeApi = {
    loadMessages: vi.fn<ChatApi["loadMessages"]>(refuse("loadMessages")),
    sendMessage: vi.fn<ChatApi["sendMessage"]>(refuse("sendMessage")),
    stopTurn: vi.fn<ChatApi["stopTurn"]>(refuse("stopTurn")),
    answerWithoutWaiting: vi.fn<ChatApi["answerWithoutWaiting"]>(refuse("answerWithoutWaiting")),
    answerApproval: vi.fn<ChatApi["answerApproval"]>(refuse("answerApproval")),
    storeAttachment: vi.fn<ChatApi["storeAttachment"]>(refuse("storeAttachment")),
    openExternal: vi.fn<ChatApi["openExternal"]>(refuse("openExternal")),
  };
  const frames: (() => void)[] = [];
  let time = 1_000_000;
  let tick: (() => void) | null = null;
  const restorePlace = vi.fn(() => Promise.resolve());
  const scroll = {
    toEnd: vi.fn(() => Promise.resolve()),
    atEnd: vi.fn(() => true),
    keepPlace: vi.fn(() => restorePlace),
  };
  const onChanged = vi.fn();
  const onConversationStarted = vi.fn();
  const controller = new TurnController({
    api,
    frame: (run) => frames.push(run),
    clock: {
      now: () => time,
      every: (_ms, run) => {
        tick = run;
        return () => (tick = null);
      },
    },
    scroll,
    onChanged,
    onConversationStarted,
    ...extra,
  });
  /** The channel of the turn `send` starts; the host answers `started` (the default: c1, t1). */
  let emit: (event: TurnEvent) => void = () => {
    throw new Error("no turn was sent");
  };
  function acceptTurns(started = { conversation: "c1", turn: "t1" }): void {
    api.sendMessage.mockImplementation((_request, onEvent) => {
      emit = onEvent;
      return Promise.resolve(started);
    });
  }
  return {
    api,
    controller,
    scroll,
    restorePlace,
    onChanged,
    onConversationStarted,
    frames,
    acceptTurns,
    emit: (event: TurnEvent) => emit(event),
    agent: (...events: AgentEvent[]) => events.forEach((event) => emit({ type: "agent", event })),
    /** Runs the frames requested so far, as the browser would before its next paint. */
    runFrames(): void {
      for (const run of frames.splice(0)) run();
    },
    /** Moves the clock on, and the controller's once-a-second tick with it. */
    advance(ms: number): void {
      time += ms;
      tick?.();
    },
    get clockRunning(): boolean {
      return tick !== null;
    },
  };
}

/** The texts of the messages on screen, with their roles and states. */
function shown(controller: TurnController): string[] {
  return controller.chat.messages.map(
    (m) => `${m.role}/${m.status}: ${m.blocks.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join(" ")}`,
  );
}

describe("a turn in the chat controller", () => {
  it("asks for the thinking picked with the model, and for none when it is the model's default", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.open(null);
    await t.controller.send({ ...choice, thinking: "high" }, "Plan it", []);
    expect(t.api.sendMessage.mock.calls[0]?.[0]).toEqual({
      conversation: null,
      text: "Plan it",
      attachments: [],
      provider: "claude",
      model: "claude-sonnet",
      reasoning: "high",
    });
  });

  it("streams an answer: sends, shows the message at once, applies events, reloads when it ends", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.open(null);
    await t.controller.send(choice, "Hello", []);

    expect(t.api.sendMessage).toHaveBeenCalledWith(
      { conversation: null, text: "Hello", attachments: [], provider: "claude", model: "claude-sonnet" },
      expect.any(Function),
    );
    expect(shown(t.controller)).toEqual(["user/complete: Hello"]);
    expect(t.controller.turn).toBe("t1");
    expect(t.controller.busy).toBe(true);
    expect(t.onConversationStarted).toHaveBeenCalledWith("c1");
    expect(t.onChanged).toHaveBeenCalledTimes(1);

    t.agent({ type: "turn_started", turn: 1 }, { type: "text_delta", text: "Hi " }, { type: "text_delta", text: "there" });
    t.runFrames();
    expect(shown(t.controller)).toEqual(["user/complete: Hello", "assistant/streaming: Hi there"]);
    expect(t.scroll.toEnd).toHaveBeenCalled();

    const saved = [stored(1, "user", "Hello"), stored(2, "assistant", "Hi there")];
    t.api.loadMessages.mockResolvedValue(saved);
    t.agent({ type: "message_done", message: { role: "assistant", blocks: [{ type: "text", text: "Hi there" }] } });
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(t.controller.turn).toBeNull();
    expect(t.controller.busy).toBe(false);
    expect(t.onChanged).toHaveBeenCalledTimes(2);
    await vi.waitFor(() => expect(t.controller.chat.messages[0]?.id).toBe(1));
    expect(t.api.loadMessages).toHaveBeenCalledWith("c1", null, PAGE);
    expect(shown(t.controller)).toEqual(["user/complete: Hello", "assistant/complete: Hi there"]);
    expect(t.controller.error).toBeNull();
    expect(t.controller.draftText).toBe("");
  });

  it("gives a refused message back, files too, with an error that offers Settings", async () => {
    const t = setup();
    const file = new File(["png"], "pixel.png", { type: "image/png" });
    const media: MediaRef = { hash: "ab12", mime: "image/png", bytes: 3 };
    t.api.storeAttachment.mockResolvedValue(media);
    t.api.sendMessage.mockRejectedValue({
      message: "the environment variable ANTHROPIC_API_KEY holding the API key is not set",
      action: "open_settings",
    });
    await t.controller.open(null);
    await t.controller.send(choice, "Hello there", [file]);

    expect(t.api.sendMessage.mock.calls[0]?.[0].attachments).toEqual(["ab12"]);
    expect(t.controller.error).toEqual({
      message: "the environment variable ANTHROPIC_API_KEY holding the API key is not set",
      action: "open_settings",
    });
    expect(t.controller.chat.messages).toEqual([]);
    expect(t.controller.draftText).toBe("Hello there");
    expect(t.controller.draftFiles).toEqual([file]);
    expect(t.controller.busy).toBe(false);
    expect(t.onConversationStarted).not.toHaveBeenCalled();
  });

  it("gives the message back when an image cannot be stored, and sends nothing", async () => {
    const t = setup();
    const file = new File(["x"], "huge.png", { type: "image/png" });
    t.api.storeAttachment.mockRejectedValue(new Error("the image is larger than 20 MB"));
    await t.controller.send(choice, "Look", [file]);

    expect(t.controller.error?.message).toBe("The file could not be attached: the image is larger than 20 MB");
    expect(t.controller.error?.action).toBeUndefined();
    expect(t.api.sendMessage).not.toHaveBeenCalled();
    expect(t.controller.chat.messages).toEqual([]);
    expect(t.controller.draftText).toBe("Look");
    expect(t.controller.draftFiles).toEqual([file]);
  });

  it("sends a text file's name and text beside the images, shows it at once, and gives it back when refused", async () => {
    const t = setup();
    const csv = new File(["city,temp\nOslo,4\n"], "weather.csv", { type: "text/csv" });
    const png = new File(["png"], "pixel.png", { type: "image/png" });
    t.api.storeAttachment.mockResolvedValue({ hash: "ab12", mime: "image/png", bytes: 3 });
    let shownWhileSending: unknown[] = [];
    t.api.sendMessage.mockImplementation(() => {
      shownWhileSending = t.controller.chat.messages.flatMap((m) => m.blocks.map((b) => b.type));
      return Promise.reject(new Error("the model is busy"));
    });
    await t.controller.open(null);
    await t.controller.send(choice, "Compare", [csv, png]);

    const request = t.api.sendMessage.mock.calls[0]?.[0];
    expect(request?.attachments).toEqual(["ab12"]);
    expect(request?.files).toEqual([{ name: "weather.csv", text: "city,temp\nOslo,4\n" }]);
    expect(shownWhileSending).toEqual(["text", "image", "file"]);
    expect(t.controller.draftFiles).toEqual([csv, png]);

    // A file that is no text never leaves the page.
    t.api.sendMessage.mockClear();
    const binary = new File([new Uint8Array([0, 0xff, 0xfe])], "model.bin", { type: "application/octet-stream" });
    t.controller.draftFiles = [];
    await t.controller.send(choice, "Read", [binary]);
    expect(t.api.sendMessage).not.toHaveBeenCalled();
    expect(t.controller.error?.message).toContain("The file could not be attached: model.bin is not a text file");
    expect(t.controller.draftFiles).toEqual([binary]);
  });

  it("sends a PDF by hash and name after the images, shows it at once, and gives it back when refused", async () => {
    const t = setup();
    const paper = new File(["%PDF-1.7\n" + "x".repeat(200_000)], "attention.pdf", { type: "application/pdf" });
    const png = new File(["png"], "pixel.png", { type: "image/png" });
    const pdfMedia = { hash: "cd34", mime: "application/pdf", bytes: paper.size };
    t.api.storeAttachment.mockImplementation((file: Blob) =>
      Promise.resolve(file === paper ? pdfMedia : { hash: "ab12", mime: "image/png", bytes: 3 }),
    );
    let shownWhileSending: unknown[] = [];
    t.api.sendMessage.mockImplementation(() => {
      shownWhileSending = t.controller.chat.messages.flatMap((m) => m.blocks.map((b) => b.type));
      return Promise.reject(new Error("the model is busy"));
    });
    await t.controller.open(null);
    await t.controller.send(choice, "Summarise", [paper, png]);

    const request = t.api.sendMessage.mock.calls[0]?.[0];
    expect(request?.attachments).toEqual(["ab12"]);
    expect(request?.documents).toEqual([{ name: "attention.pdf", hash: "cd34" }]);
    expect(request?.files).toBeUndefined();
    expect(shownWhileSending).toEqual(["text", "image", "document"]);
    expect(t.controller.draftFiles).toEqual([paper, png]);
  });

  it("sends one message at a time: a second while the first's image is stored is refused, saying why", async () => {
    const t = setup();
    t.acceptTurns();
    const storing = deferred<MediaRef>();
    t.api.storeAttachment.mockReturnValueOnce(storing.promise);
    const file = new File(["png"], "frame.png", { type: "image/png" });
    await t.controller.open(null);
    const first = t.controller.send(choice, "With a frame", [file]);
    expect(t.controller.sending).toBe(true);
    // A view's message (the composer's Send waits while `sending`).
    expect(await t.controller.send(choice, "From a view", [])).toBe(false);
    expect(t.controller.error?.message).toBe(
      "A message is already on its way: wait for the answer, or stop it, before sending another.",
    );
    storing.resolve({ hash: "f1", mime: "image/png", bytes: 3 });
    expect(await first).toBe(true);
    expect(t.controller.sending).toBe(false);
    expect(t.api.sendMessage).toHaveBeenCalledTimes(1);
    expect(t.api.sendMessage.mock.calls[0]?.[0].text).toBe("With a frame");
    // And none while its answer is written.
    expect(await t.controller.send(choice, "Too soon", [])).toBe(false);
    expect(t.api.sendMessage).toHaveBeenCalledTimes(1);
  });

  it("sends into the conversation open when Send was pressed, once its messages have loaded", async () => {
    const t = setup();
    t.acceptTurns({ conversation: "c2", turn: "t1" });
    const loading = deferred<StoredMessage[]>();
    t.api.loadMessages.mockReturnValueOnce(loading.promise);
    const opened = t.controller.open("c2");
    const sent = t.controller.send(choice, "Into c2", []);
    loading.resolve([stored(7, "user", "Earlier in c2")]);
    await opened;
    expect(await sent).toBe(true);
    expect(t.api.sendMessage.mock.calls[0]?.[0].conversation).toBe("c2");
    expect(shown(t.controller)).toEqual(["user/complete: Earlier in c2", "user/complete: Into c2"]);
  });

  it("keeps a message whose image is stored while the user opens another conversation in its own", async () => {
    const t = setup();
    t.acceptTurns();
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "In c1")]);
    await t.controller.open("c1");
    const storing = deferred<MediaRef>();
    t.api.storeAttachment.mockReturnValueOnce(storing.promise);
    const sent = t.controller.send(choice, "For c1", [new File(["png"], "a.png", { type: "image/png" })]);
    // A long conversation: older messages to load.
    const page = Array.from({ length: PAGE }, (_, i) => stored(100 + i, "user", `In c2 ${i}`));
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c2");
    storing.resolve({ hash: "a1", mime: "image/png", bytes: 3 });
    expect(await sent).toBe(true);
    expect(t.api.sendMessage.mock.calls[0]?.[0].conversation).toBe("c1");
    expect(shown(t.controller)[0]).toBe("user/complete: In c2 0");
    expect(t.controller.hasOlder).toBe(true);
    // Back in c1 while its turn runs: its own messages, and nothing older to load.
    await t.controller.open("c1");
    expect(shown(t.controller)).toEqual(["user/complete: In c1", "user/complete: For c1 [image]"]);
    expect(t.controller.hasOlder).toBe(false);
  });

  it("does not let a reload that started before a send replace the new turn's state", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.open(null);
    await t.controller.send(choice, "First", []);
    const reload = deferred<StoredMessage[]>();
    t.api.loadMessages.mockReturnValueOnce(reload.promise);
    t.emit({ type: "ended", status: "complete", saved: true });
    // The next message goes before the reload of the first turn comes back.
    await t.controller.send(choice, "Second", []);
    reload.resolve([stored(1, "user", "First"), stored(2, "assistant", "One")]);
    await reload.promise;
    await Promise.resolve();
    t.agent({ type: "text_delta", text: "Two" });
    t.runFrames();
    expect(shown(t.controller)).toEqual(["user/complete: First", "user/complete: Second", "assistant/streaming: Two"]);
  });

  it("gives a refused message back before what was typed since, keeping it", async () => {
    const t = setup();
    const refused = deferred<never>();
    t.api.sendMessage.mockReturnValueOnce(refused.promise);
    await t.controller.open(null);
    const sent = t.controller.send(choice, "Refused one", []);
    t.controller.draftText = "typed meanwhile";
    refused.resolve(Promise.reject(new Error("no key")) as never);
    expect(await sent).toBe(false);
    expect(t.controller.draftText).toBe("Refused one\n\ntyped meanwhile");
  });

  it("sends nothing without a model, says so and gives the message back", async () => {
    const t = setup();
    const image: MediaRef = { hash: "a".repeat(64), mime: "image/png", width: 1600, height: 1000, bytes: 2_400_000 };
    expect(await t.controller.send(null, "Hello", [image])).toBe(false);
    expect(t.api.sendMessage).not.toHaveBeenCalled();
    expect(t.controller.chat.messages).toEqual([]);
    expect(t.controller.error?.message).toMatch(/Pick a model/);
    expect(t.controller.draftText).toBe("Hello");
    expect(t.controller.draftFiles).toEqual([image]);
  });

  it("stops on request and keeps the partial answer, marked stopped", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me a story", []);
    t.agent({ type: "turn_started", turn: 1 }, { type: "text_delta", text: "Once upon" });
    t.runFrames();

    t.api.stopTurn.mockResolvedValue(undefined);
    expect(t.controller.stop()).toBe(true);
    expect(t.api.stopTurn).toHaveBeenCalledWith("t1");

    const reload = deferred<StoredMessage[]>();
    t.api.loadMessages.mockReturnValue(reload.promise);
    t.agent({ type: "cancelled" });
    t.emit({ type: "ended", status: "interrupted", saved: true });
    // Before the store answers, the stop shows on the live state.
    expect(shown(t.controller)).toEqual(["user/complete: Tell me a story", "assistant/interrupted: Once upon"]);
    reload.resolve([stored(1, "user", "Tell me a story"), stored(2, "assistant", "Once upon", "interrupted")]);
    await vi.waitFor(() => expect(t.controller.chat.messages[1]?.id).toBe(2));
    expect(shown(t.controller)).toEqual(["user/complete: Tell me a story", "assistant/interrupted: Once upon"]);
    expect(t.controller.error).toBeNull();
    expect(t.controller.draftText).toBe("");

    // With no turn running there is nothing to stop (Escape stays the page's).
    expect(t.controller.stop()).toBe(false);
    expect(t.api.stopTurn).toHaveBeenCalledTimes(1);
  });

  it("gives back the text, images and mentions of a turn that saved nothing, though the same words were sent before", async () => {
    const onMentionsBack = vi.fn();
    const t = setup({ onMentionsBack });
    t.acceptTurns();
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "yes"), stored(2, "assistant", "Done.")]);
    await t.controller.open("c1");
    const image: MediaRef = { hash: "b".repeat(64), mime: "image/png", width: 1600, height: 1000, bytes: 2_400_000 };
    const mentions = { resources: [], prompt: null, labels: ["@report"] };
    await t.controller.send(choice, "yes", [image], null, mentions);
    t.controller.draftText = "typed meanwhile";
    // Stopped while the mentioned resource was read: the host says nothing was saved.
    t.emit({ type: "ended", status: "interrupted", saved: false });
    expect(t.controller.draftText).toBe("yes\n\ntyped meanwhile");
    expect(t.controller.draftFiles).toEqual([image]);
    expect(onMentionsBack).toHaveBeenCalledWith(mentions);
    // The message shown while it was sent leaves; the earlier "yes" stays.
    expect(shown(t.controller)).toEqual(["user/complete: yes", "assistant/complete: Done."]);
  });

  it("keeps a message that was not saved for its conversation, and gives it back there", async () => {
    const t = setup();
    t.acceptTurns();
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "Earlier")]);
    await t.controller.open("c1");
    await t.controller.send(choice, "Summarise @report", []);
    t.api.loadMessages.mockResolvedValueOnce([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    t.emit({ type: "ended", status: "error", error: { message: "the server did not answer" }, saved: false });
    // Nothing lands in the other conversation.
    expect(t.controller.error).toBeNull();
    expect(t.controller.draftText).toBe("");
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "Earlier")]);
    await t.controller.open("c1");
    expect(t.controller.error?.message).toBe("the server did not answer");
    expect(t.controller.draftText).toBe("Summarise @report");
    expect(shown(t.controller)).toEqual(["user/complete: Earlier"]);
    // Once.
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "Earlier")]);
    await t.controller.open("c1");
    expect(t.controller.draftText).toBe("Summarise @report");
  });

  it("keeps each unsaved message for its own conversation, however many there are", async () => {
    const t = setup();
    t.acceptTurns({ conversation: "c1", turn: "t1" });
    t.api.loadMessages.mockResolvedValue([]);
    await t.controller.open("c1");
    await t.controller.send(choice, "First", []);
    await t.controller.open("c2");
    t.emit({ type: "ended", status: "error", error: { message: "one" }, saved: false });
    t.acceptTurns({ conversation: "c2", turn: "t2" });
    await t.controller.send(choice, "Second", []);
    await t.controller.open("c3");
    t.emit({ type: "ended", status: "error", error: { message: "two" }, saved: false });
    expect(t.controller.draftText).toBe("");
    await t.controller.open("c1");
    expect(t.controller.draftText).toBe("First");
    expect(t.controller.error?.message).toBe("one");
    t.controller.draftText = "";
    await t.controller.open("c2");
    expect(t.controller.draftText).toBe("Second");
    expect(t.controller.error?.message).toBe("two");
  });

  it("answers in its own conversation only: another one opened meanwhile neither shows nor stops it", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Start", []);
    expect(t.controller.answeringHere).toBe(true);
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    expect(t.controller.busy).toBe(true);
    expect(t.controller.answeringHere).toBe(false);
    // Escape (or Stop) there stops nothing.
    expect(t.controller.stop()).toBe(false);
    expect(t.api.stopTurn).not.toHaveBeenCalled();
    await t.controller.open("c1");
    expect(t.controller.answeringHere).toBe(true);
    t.api.stopTurn.mockResolvedValue(undefined);
    expect(t.controller.stop()).toBe(true);
  });

  it("says which servers the turn waits for, in its own conversation, and can go on without them", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Read my notes", []);
    expect(t.controller.startingServers).toEqual([]);
    t.emit({ type: "servers_starting", servers: ["filesystem", "github"] });
    expect(t.controller.startingServers).toEqual(["filesystem", "github"]);
    t.emit({ type: "servers_starting", servers: ["github"] });
    expect(t.controller.startingServers).toEqual(["github"]);

    // Not shown in another conversation, nor skipped from there.
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    expect(t.controller.startingServers).toEqual([]);
    t.controller.answerWithoutWaiting();
    expect(t.api.answerWithoutWaiting).not.toHaveBeenCalled();

    await t.controller.open("c1");
    expect(t.controller.startingServers).toEqual(["github"]);
    t.api.answerWithoutWaiting.mockResolvedValue(undefined);
    t.controller.answerWithoutWaiting();
    expect(t.api.answerWithoutWaiting).toHaveBeenCalledWith("t1");
    t.emit({ type: "servers_starting", servers: [] });
    expect(t.controller.startingServers).toEqual([]);
  });

  it("stops showing the wait when the turn ends, and says a refused skip", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Read my notes", []);
    t.emit({ type: "servers_starting", servers: ["filesystem"] });
    t.api.answerWithoutWaiting.mockRejectedValue(new Error("the host is gone"));
    t.controller.answerWithoutWaiting();
    await vi.waitFor(() => expect(t.controller.error?.message).toContain("the host is gone"));
    t.api.loadMessages.mockResolvedValue([]);
    t.emit({ type: "ended", status: "interrupted", saved: false });
    expect(t.controller.startingServers).toEqual([]);
    expect(t.controller.chat.starting).toEqual([]);
  });

  it("says why a complete answer is short, until the next message or conversation", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me a long story", []);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me a long story"), stored(2, "assistant", "Once")]);
    t.emit({ type: "ended", status: "complete", saved: true, notice: "The answer was cut off." });
    expect(t.controller.notice).toBe("The answer was cut off.");
    expect(t.controller.error).toBeNull();
    t.controller.dismissNotice();
    expect(t.controller.notice).toBeNull();

    await t.controller.send(choice, "Go on", []);
    t.emit({ type: "ended", status: "complete", saved: true, notice: "The model stopped after 25 requests in a row." });
    expect(t.controller.notice).toContain("25 requests");
    await t.controller.send(choice, "And again", []);
    expect(t.controller.notice).toBeNull();
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(t.controller.notice).toBeNull();
    await t.controller.send(choice, "Once more", []);
    t.emit({ type: "ended", status: "complete", saved: true, notice: "The model refused to answer." });
    expect(t.controller.notice).toBe("The model refused to answer.");
    await t.controller.open("c2");
    expect(t.controller.notice).toBeNull();
  });

  it("answers a failed turn again with no new message, in its own conversation only", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me something", []);
    expect(t.controller.canTryAgain).toBe(false);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    t.emit({ type: "ended", status: "error", error: { message: "the upstream model crashed" }, saved: true });
    expect(t.controller.canTryAgain).toBe(true);

    // Not from another conversation, whose last answer finished.
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat"), stored(10, "assistant", "Hello")]);
    await t.controller.open("c2");
    expect(t.controller.canTryAgain).toBe(false);
    expect(t.controller.unansweredNotice).toBeNull();
    expect(await t.controller.tryAgain(choice)).toBe(false);
    expect(t.api.sendMessage).toHaveBeenCalledTimes(1);

    // Back in its conversation a new failure offers it again; trying sends no message.
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something"), stored(2, "assistant", "Half", "complete")]);
    await t.controller.open("c1");
    expect(t.controller.canTryAgain).toBe(false);
    t.acceptTurns();
    await t.controller.send(choice, "Once more", []);
    t.emit({ type: "ended", status: "error", error: { message: "overloaded" }, saved: true });
    expect(t.controller.canTryAgain).toBe(true);
    const before = t.controller.chat.messages.length;
    expect(await t.controller.tryAgain(choice)).toBe(true);
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(
      { conversation: "c1", text: "", attachments: [], provider: "claude", model: "claude-sonnet", again: true },
      expect.any(Function),
    );
    expect(t.controller.chat.messages.length).toBe(before);
    expect(t.controller.canTryAgain).toBe(false);
    expect(t.controller.error).toBeNull();
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(t.controller.canTryAgain).toBe(false);
  });

  it("offers Try again in a conversation opened after its answer failed, and says why an answer ended short there", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me something", []);
    // Another conversation shows when the turn fails, and again when a second one is cut off.
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat"), stored(10, "assistant", "Hello")]);
    await t.controller.open("c2");
    t.emit({ type: "ended", status: "error", error: { message: "the upstream model crashed" }, saved: true });
    expect(t.controller.error).toBeNull();
    expect(t.controller.canTryAgain).toBe(false);

    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something"), stored(2, "assistant", "Hal", "error")]);
    await t.controller.open("c1");
    expect(t.controller.canTryAgain).toBe(true);
    expect(t.controller.unansweredNotice).toBe("The last answer did not finish.");
    expect(await t.controller.tryAgain(choice)).toBe(true);
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(expect.objectContaining({ conversation: "c1", text: "", again: true }), expect.any(Function));
    expect(t.controller.unansweredNotice).toBeNull();

    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat"), stored(10, "assistant", "Hello")]);
    await t.controller.open("c2");
    t.emit({ type: "ended", status: "complete", saved: true, notice: "The answer was cut off." });
    expect(t.controller.notice).toBeNull();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something"), stored(3, "assistant", "Cut")]);
    await t.controller.open("c1");
    expect(t.controller.notice).toBe("The answer was cut off.");
    expect(t.controller.canTryAgain).toBe(false);
    // Said once.
    await t.controller.open("c2");
    await t.controller.open("c1");
    expect(t.controller.notice).toBeNull();
  });

  it("offers Try again for a conversation whose last message has no answer, and none while a turn runs", async () => {
    const t = setup();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    await t.controller.open("c1");
    expect(t.controller.unansweredNotice).toBe("The last message has no answer.");
    // An answer the user stopped is not offered again; one that failed is.
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something"), stored(2, "assistant", "Hal", "interrupted")]);
    await t.controller.open("c2");
    expect(t.controller.canTryAgain).toBe(false);
    t.api.loadMessages.mockResolvedValue([]);
    await t.controller.open("c3");
    expect(t.controller.canTryAgain).toBe(false);
    // While a turn runs in another conversation, none.
    t.acceptTurns({ conversation: "c4", turn: "t4" });
    await t.controller.open(null);
    await t.controller.send(choice, "Elsewhere", []);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    await t.controller.open("c1");
    expect(t.controller.canTryAgain).toBe(false);
    expect(t.controller.unansweredNotice).toBeNull();
  });

  it("keeps Try again off an unrelated error, and on the bar once the turn's error is dismissed", async () => {
    const t = setup();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Hi"), stored(2, "assistant", "Hal", "error")]);
    await t.controller.open("c1");
    t.api.openExternal.mockRejectedValue(new Error("no browser"));
    t.controller.openLink("https://example.com");
    await vi.waitFor(() => expect(t.controller.error).not.toBeNull());
    expect(t.controller.tryAgainWithError).toBe(false);
    expect(t.controller.unansweredNotice).toBe("The last answer did not finish.");

    t.acceptTurns();
    await t.controller.send(choice, "Once more", []);
    t.emit({ type: "ended", status: "error", error: { message: "overloaded" }, saved: true });
    expect(t.controller.tryAgainWithError).toBe(true);
    expect(t.controller.unansweredNotice).toBeNull();
    await vi.waitFor(() => expect(t.api.loadMessages).toHaveBeenCalledTimes(2));
    t.controller.dismissError();
    await vi.waitFor(() => expect(t.controller.unansweredNotice).toBe("The last answer did not finish."));
    expect(t.controller.canTryAgain).toBe(true);
  });

  it("reads a conversation again when its turn ends after it was opened anew before the host answered", async () => {
    const t = setup();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Hi"), stored(2, "assistant", "Hello")]);
    await t.controller.open("c1");
    const started = deferred<{ conversation: string; turn: string }>();
    let emit!: (event: TurnEvent) => void;
    t.api.sendMessage.mockImplementation((_request, onEvent) => {
      emit = onEvent;
      return started.promise;
    });
    const sending = t.controller.send(choice, "Tell me more", []);
    // Away and back while the host has not answered: the load shows the message alone.
    await t.controller.open("c2");
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Hi"), stored(2, "assistant", "Hello"), stored(3, "user", "Tell me more")]);
    await t.controller.open("c1");
    started.resolve({ conversation: "c1", turn: "t1" });
    await sending;
    t.api.loadMessages.mockResolvedValue([
      stored(1, "user", "Hi"),
      stored(2, "assistant", "Hello"),
      stored(3, "user", "Tell me more"),
      stored(4, "assistant", "More."),
    ]);
    emit({ type: "ended", status: "complete", saved: true, notice: "The answer was cut off." });
    await vi.waitFor(() => expect(t.controller.chat.messages).toHaveLength(4));
    expect(t.controller.canTryAgain).toBe(false);
    expect(t.controller.notice).toBe("The answer was cut off.");
  });

  it("writes the last answer anew with the model picked now, the old one folded, and puts it back when refused", async () => {
    const t = setup();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Name a colour"), stored(2, "assistant", "Red.")]);
    await t.controller.open("c1");
    expect(t.controller.canAnswerAgain).toBe(true);
    expect(t.controller.canTryAgain).toBe(false);
    expect(await t.controller.answerAgain(null)).toBe(false);
    expect(t.controller.error?.message).toContain("Pick a model");

    // Refused: nothing was replaced, and the answer shows as it was again.
    t.api.sendMessage.mockRejectedValueOnce({ message: "the provider is gone" });
    expect(await t.controller.answerAgain({ provider: "gpt", model: "gpt-5" })).toBe(false);
    await vi.waitFor(() => expect(t.controller.chat.messages.map((m) => m.status)).toEqual(["complete", "complete"]));
    expect(t.controller.canTryAgain).toBe(false);
    expect(t.controller.canAnswerAgain).toBe(true);

    // A message the host refuses changes nothing of what the conversation offers.
    t.api.sendMessage.mockRejectedValueOnce({ message: "no key for gpt" });
    expect(await t.controller.send(choice, "Another", [])).toBe(false);
    expect(t.controller.canAnswerAgain).toBe(true);

    t.acceptTurns();
    expect(await t.controller.answerAgain({ provider: "gpt", model: "gpt-5" })).toBe(true);
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(
      { conversation: "c1", text: "", attachments: [], provider: "gpt", model: "gpt-5", again: true, replaceAnswer: true },
      expect.any(Function),
    );
    // No new message; the old answer is marked replaced at once, and no second one goes.
    expect(t.controller.chat.messages.map((m) => m.status)).toEqual(["complete", "replaced"]);
    expect(t.controller.canAnswerAgain).toBe(false);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Name a colour"), stored(2, "assistant", "Red.", "replaced"), stored(3, "assistant", "Blue.")]);
    t.emit({ type: "ended", status: "complete", saved: true });
    await vi.waitFor(() => expect(t.controller.chat.messages).toHaveLength(3));
    expect(t.controller.canAnswerAgain).toBe(true);
  });

  it("changes the last message: given back before what was typed, sent in its place, put back when refused", async () => {
    const t = setup();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Name a colour"), stored(2, "assistant", "Red.")]);
    await t.controller.open("c1");
    expect(t.controller.editableId).toBe(1);
    t.controller.draftText = "typed meanwhile";
    t.controller.edit();
    expect(t.controller.editing).toBe("c1");
    expect(t.controller.draftText).toBe("Name a colour\n\ntyped meanwhile");
    expect(t.controller.editableId).toBeNull();
    // Cancelled: the composer keeps its text, and the next message is a new one.
    t.controller.cancelEdit();
    expect(t.controller.editing).toBeNull();
    t.controller.edit();

    // Refused: nothing was replaced; the message comes back and it is still a change.
    const fromComposer = (text: string) => t.controller.send(choice, text, [], null, null, [], null, true);
    t.api.sendMessage.mockRejectedValueOnce({ message: "the provider is gone" });
    expect(await fromComposer("Name a fruit")).toBe(false);
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(expect.objectContaining({ conversation: "c1", text: "Name a fruit", replaceMessage: true }), expect.any(Function));
    await vi.waitFor(() => expect(t.controller.chat.messages.map((m) => m.status)).toEqual(["complete", "complete"]));
    expect(t.controller.editing).toBe("c1");

    // A view's message while the change is made is a new message, never the change.
    t.acceptTurns();
    expect(await t.controller.send(choice, "From a view", [])).toBe(true);
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(expect.not.objectContaining({ replaceMessage: true }), expect.any(Function));
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(t.controller.editing).toBe("c1");
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Name a colour"), stored(2, "assistant", "Red.")]);
    await t.controller.open("c1");
    t.controller.edit();

    // Taken, then refused by the host before it saved anything: the fold opens again and
    // the change goes on.
    expect(await fromComposer("Name a fruit")).toBe(true);
    t.emit({ type: "ended", status: "error", error: { message: "stopped while servers started" }, saved: false });
    expect(t.controller.editing).toBe("c1");
    await vi.waitFor(() => expect(t.controller.chat.messages.map((m) => m.status)).toEqual(["complete", "complete"]));

    expect(await fromComposer("Name a fruit")).toBe(true);
    expect(t.controller.chat.messages.map((m) => [m.role, m.status])).toEqual([
      ["user", "replaced"],
      ["assistant", "replaced"],
      ["user", "complete"],
    ]);
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(t.controller.editing).toBeNull();

    // Another conversation opened stops a change.
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Name a colour"), stored(2, "assistant", "Red.")]);
    await t.controller.open("c1");
    t.controller.edit();
    await t.controller.open("c2");
    expect(t.controller.editing).toBeNull();
    t.acceptTurns({ conversation: "c2", turn: "t2" });
    await fromComposer("Hello");
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(expect.not.objectContaining({ replaceMessage: true }), expect.any(Function));
  });

  it("offers Try again once more when answering again stopped before it began", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me something", []);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    t.emit({ type: "ended", status: "error", error: { message: "crashed" }, saved: true });
    expect(await t.controller.tryAgain(choice)).toBe(true);
    expect(t.controller.canTryAgain).toBe(false);
    t.emit({ type: "ended", status: "interrupted", saved: false });
    expect(t.controller.canTryAgain).toBe(true);
    expect(t.controller.draftText).toBe("");
  });

  it("offers Try again for a turn that failed before the host said where it runs", async () => {
    const t = setup();
    t.api.sendMessage.mockImplementation((_request, onEvent) => {
      onEvent({ type: "ended", status: "error", error: { message: "crashed at once" }, saved: true });
      return Promise.resolve({ conversation: "c1", turn: "t1" });
    });
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    await t.controller.send(choice, "Tell me something", []);
    expect(t.controller.canTryAgain).toBe(true);
  });

  it("keeps the composer as it is when answering again is refused", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Tell me something", []);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Tell me something")]);
    t.emit({ type: "ended", status: "error", error: { message: "crashed" }, saved: true });
    t.controller.draftText = "typed since";
    t.api.sendMessage.mockRejectedValue({ message: "the provider is gone" });
    expect(await t.controller.tryAgain(choice)).toBe(false);
    expect(t.controller.draftText).toBe("typed since");
    expect(t.controller.error?.message).toBe("the provider is gone");
    expect(t.controller.canTryAgain).toBe(true);
  });

  it("sends a new chat's instructions with its first message only", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.open(null);
    await t.controller.send(choice, "Hello", [], null, null, [], "Answer like a pirate.");
    expect(t.api.sendMessage).toHaveBeenLastCalledWith(
      expect.objectContaining({ conversation: null, instructions: "Answer like a pirate." }),
      expect.any(Function),
    );
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Hello")]);
    t.emit({ type: "ended", status: "complete", saved: true });
    await t.controller.open("c1");
    await t.controller.send(choice, "Again", [], null, null, [], "ignored");
    expect(t.api.sendMessage.mock.lastCall?.[0]).not.toHaveProperty("instructions");
  });

  it("does not pull the user back to a new chat they left before it started", async () => {
    const t = setup();
    const started = deferred<{ conversation: string; turn: string }>();
    t.api.sendMessage.mockReturnValue(started.promise);
    await t.controller.open(null);
    const sending = t.controller.send(choice, "New topic", []);
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    started.resolve({ conversation: "c-new", turn: "t1" });
    expect(await sending).toBe(true);
    expect(t.onConversationStarted).not.toHaveBeenCalled();
    expect(t.onChanged).toHaveBeenCalled();
    expect(t.controller.showing).toBe("c2");
  });

  it("shows a stop that the host refused", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Hi", []);
    t.api.stopTurn.mockRejectedValue(new Error("no such turn"));
    t.controller.stop();
    await vi.waitFor(() => expect(t.controller.error?.message).toBe("no such turn"));
  });

  it("forwards an approval answer for the running turn, and says when the call no longer waits", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "List files", []);
    const call: ToolCall = { id: "k1", name: "fs__list", arguments: { path: "." } };
    t.agent(
      { type: "tool_call_ready", call },
      { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: "List a folder", annotations: { readOnlyHint: true } },
    );
    t.runFrames();
    expect(t.controller.chat.calls.k1?.state).toBe("approval");
    expect(t.controller.chat.calls.k1?.approval?.title).toBe("List a folder");

    t.api.answerApproval.mockResolvedValueOnce(true);
    t.controller.answer("k1", "allow_once");
    expect(t.api.answerApproval).toHaveBeenCalledWith("t1", "k1", "allow_once");
    expect(t.controller.answered("k1")).toBe(true);
    // A second click (a double click) before the host moved the call on sends nothing, and
    // shows no error.
    t.controller.answer("k1", "deny");
    expect(t.api.answerApproval).toHaveBeenCalledTimes(1);
    await Promise.resolve();
    expect(t.controller.error).toBeNull();

    // A call that no longer waits says so, and its buttons work again.
    t.api.answerApproval.mockResolvedValueOnce(false);
    t.controller.answer("k2", "always_allow");
    expect(t.api.answerApproval).toHaveBeenLastCalledWith("t1", "k2", "always_allow");
    await vi.waitFor(() =>
      expect(t.controller.error?.message).toBe("That tool call is no longer waiting for an answer."),
    );
    expect(t.controller.answered("k2")).toBe(false);
    // So does an answer that failed (the "always" not confirmed): it can be given again.
    t.api.answerApproval.mockRejectedValueOnce(new Error("not confirmed"));
    t.controller.answer("k3", "always_allow");
    await vi.waitFor(() => expect(t.controller.error?.message).toBe("not confirmed"));
    t.api.answerApproval.mockResolvedValueOnce(true);
    t.controller.answer("k3", "allow_once");
    expect(t.api.answerApproval).toHaveBeenLastCalledWith("t1", "k3", "allow_once");
  });

  it("answers nothing when no turn runs", () => {
    const t = setup();
    t.controller.answer("k1", "deny");
    expect(t.api.answerApproval).not.toHaveBeenCalled();
  });

  it("follows a tool call's events into its card: started, ready, progress, result", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Echo hi", []);
    const call: ToolCall = { id: "k1", name: "everything__echo", arguments: { message: "hi" } };
    const origin = { server: "everything", tool: "echo" };
    t.agent({ type: "turn_started", turn: 1 }, { type: "tool_call_started", id: "k1", name: call.name, origin });
    t.runFrames();
    expect(t.controller.chat.calls.k1?.state).toBe("streaming");
    t.agent({ type: "tool_call_ready", call: { ...call, origin } });
    t.runFrames();
    // Complete but not yet allowed: the host decides next.
    expect(t.controller.chat.calls.k1).toMatchObject({ state: "ready", startedAt: 1_000_000, allowed: false });
    t.agent({ type: "tool_call_running", id: "k1" });
    t.runFrames();
    expect(t.controller.chat.calls.k1).toMatchObject({ state: "running", allowed: true });
    t.agent({ type: "tool_progress", id: "k1", progress: { progress: 1, total: 2 } });
    t.runFrames();
    expect(t.controller.chat.calls.k1?.progress).toEqual({ progress: 1, total: 2 });
    t.agent({
      type: "tool_result",
      result: { call_id: "k1", name: call.name, is_error: false, parts: [{ type: "text", text: "hi" }] },
      duration_ms: 12,
    });
    t.runFrames();
    expect(t.controller.chat.calls.k1).toMatchObject({ state: "done", durationMs: 12 });
    const answer = t.controller.chat.messages[1];
    expect(answer?.role).toBe("assistant");
    expect(answer?.blocks[0]).toMatchObject({ type: "tool_call", id: "k1", arguments: { message: "hi" }, origin });
  });

  it("shows a provider error, and gives the text back when the message was not saved", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Hello", []);
    t.api.loadMessages.mockResolvedValue([]);
    t.emit({
      type: "ended",
      status: "error",
      error: { message: "the provider answered 500: internal error" },
      saved: false,
    });
    expect(t.controller.error).toEqual({ message: "the provider answered 500: internal error" });
    expect(t.controller.busy).toBe(false);
    await vi.waitFor(() => expect(t.controller.draftText).toBe("Hello"));
    expect(t.controller.chat.messages).toEqual([]);
  });

  it("gives the text back when the turn was stopped before its message was saved", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Read the report", []);
    t.api.loadMessages.mockResolvedValue([]);
    t.emit({ type: "ended", status: "interrupted", saved: false });
    await vi.waitFor(() => expect(t.controller.draftText).toBe("Read the report"));
    expect(t.controller.busy).toBe(false);
  });

  it("keeps the composer as it is when the failed turn's message was saved", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Hello", []);
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Hello"), stored(2, "assistant", "", "error")]);
    t.emit({ type: "ended", status: "error", error: { message: "the provider stalled", action: "open_settings" }, saved: true });
    await vi.waitFor(() => expect(t.controller.chat.messages[0]?.id).toBe(1));
    expect(t.controller.error?.action).toBe("open_settings");
    expect(t.controller.draftText).toBe("");
  });

  it("counts down the provider's retry (a 429) and clears it when text comes", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Hello", []);
    t.agent({
      type: "retrying",
      attempt: 1,
      delay_ms: 5000,
      error: { kind: "rate_limited", status: 429, message: "rate limited" },
    });
    expect(t.controller.retry).toBeNull();
    t.runFrames();
    expect(t.controller.retry).toEqual({ message: "rate limited", seconds: 5 });
    t.advance(1500);
    expect(t.controller.retry?.seconds).toBe(4);
    t.advance(3000);
    expect(t.controller.retry?.seconds).toBe(1);
    t.advance(500);
    expect(t.controller.retry).toBeNull();

    t.agent({ type: "retrying", attempt: 2, delay_ms: 10_000, error: { kind: "rate_limited", message: "again" } });
    t.runFrames();
    expect(t.controller.retry).toEqual({ message: "again", seconds: 10 });
    t.agent({ type: "text_delta", text: "Finally" });
    t.runFrames();
    expect(t.controller.retry).toBeNull();
  });

  it("ticks its clock only while a retry counts down, and stops it when destroyed", async () => {
    const t = setup();
    // Idle: nothing to count, so nothing wakes the window every second.
    expect(t.clockRunning).toBe(false);
    t.acceptTurns();
    await t.controller.send(choice, "hi", []);
    t.agent({ type: "retrying", attempt: 1, delay_ms: 2000, error: { kind: "rate_limited", status: 429, message: "slow" } });
    t.runFrames();
    expect(t.clockRunning).toBe(true);
    t.advance(1000);
    expect(t.controller.retry?.seconds).toBe(1);
    t.advance(1000);
    expect(t.controller.retry).toBeNull();
    expect(t.clockRunning).toBe(false);
    t.agent({ type: "retrying", attempt: 2, delay_ms: 5000, error: { kind: "rate_limited", status: 429, message: "slow" } });
    t.runFrames();
    expect(t.clockRunning).toBe(true);
    t.controller.destroy();
    expect(t.clockRunning).toBe(false);
  });

  it("applies events once per frame, in order, and the end without waiting for one", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Count", []);
    t.agent({ type: "turn_started", turn: 1 }, { type: "text_delta", text: "one " }, { type: "text_delta", text: "two " });
    expect(t.frames).toHaveLength(1);
    expect(shown(t.controller)).toEqual(["user/complete: Count"]);
    t.runFrames();
    expect(shown(t.controller)).toEqual(["user/complete: Count", "assistant/streaming: one two "]);

    t.agent({ type: "text_delta", text: "three " }, { type: "text_delta", text: "four" });
    expect(t.frames).toHaveLength(1);
    expect(shown(t.controller)[1]).toBe("assistant/streaming: one two ");

    // The end applies what waits at once; the frame that comes after finds nothing.
    t.api.loadMessages.mockReturnValue(new Promise(() => {}));
    t.emit({ type: "ended", status: "complete", saved: true });
    expect(shown(t.controller)[1]).toBe("assistant/streaming: one two three four");
    t.runFrames();
    expect(shown(t.controller)[1]).toBe("assistant/streaming: one two three four");
  });

  it("follows the stream down only while the reader is at the end", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Hello", []);
    t.scroll.toEnd.mockClear();
    t.scroll.atEnd.mockReturnValue(false);
    t.agent({ type: "text_delta", text: "a" });
    t.runFrames();
    expect(t.scroll.toEnd).not.toHaveBeenCalled();
    t.scroll.atEnd.mockReturnValue(true);
    t.agent({ type: "text_delta", text: "b" });
    t.runFrames();
    expect(t.scroll.toEnd).toHaveBeenCalledTimes(1);
    // While a consent button is on screen the chat keeps its place: following what
    // streams in below would move the button under the cursor and keep re-arming it.
    const button = document.createElement("button");
    document.body.append(button);
    const consent = armedAfter(button);
    t.agent({ type: "text_delta", text: "c" });
    t.runFrames();
    expect(t.scroll.toEnd).toHaveBeenCalledTimes(1);
    consent?.destroy?.();
    t.agent({ type: "text_delta", text: "d" });
    t.runFrames();
    expect(t.scroll.toEnd).toHaveBeenCalledTimes(2);
    button.remove();
  });

  it("keeps a running turn's live state while another conversation is open", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.open(null);
    // The conversation on screen (which a call's view is asked for in) follows.
    expect(t.controller.showing).toBeNull();
    await t.controller.send(choice, "Start", []);
    expect(t.controller.showing).toBe("c1");
    t.agent({ type: "text_delta", text: "Partial answer" });
    t.runFrames();

    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    expect(t.controller.showing).toBe("c2");
    expect(shown(t.controller)).toEqual(["user/complete: Another chat"]);
    const call: ToolCall = { id: "k1", name: "srv__echo", arguments: {} };
    t.agent({ type: "tool_call_ready", call }, { type: "approval_requested", call, arguments_text: JSON.stringify(call.arguments, null, 2), title: null, annotations: {} });
    t.runFrames();
    expect(shown(t.controller)).toEqual(["user/complete: Another chat"]);

    t.api.loadMessages.mockClear();
    await t.controller.open("c1");
    expect(t.api.loadMessages).not.toHaveBeenCalled();
    expect(shown(t.controller)[1]).toBe("assistant/streaming: Partial answer [tool_call]");
    expect(t.controller.chat.calls.k1?.state).toBe("approval");
  });

  it("puts back whether older messages exist when the user returns to the running turn", async () => {
    const t = setup();
    t.acceptTurns();
    // A short conversation: nothing older to load.
    t.api.loadMessages.mockResolvedValueOnce([stored(1, "user", "Short")]);
    await t.controller.open("c1");
    expect(t.controller.hasOlder).toBe(false);
    await t.controller.send(choice, "More", []);
    // A long one, opened while the turn runs: it has older messages.
    const page = Array.from({ length: PAGE }, (_, i) => stored(100 + i, "user", `m${i}`));
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c2");
    expect(t.controller.hasOlder).toBe(true);
    await t.controller.open("c1");
    expect(t.controller.hasOlder).toBe(false);
  });

  it("does not touch the screen when a turn ends while another conversation shows", async () => {
    const t = setup();
    t.acceptTurns();
    await t.controller.send(choice, "Start", []);
    t.api.loadMessages.mockResolvedValue([stored(9, "user", "Another chat")]);
    await t.controller.open("c2");
    t.api.loadMessages.mockClear();
    t.emit({ type: "ended", status: "error", error: { message: "boom" }, saved: true });
    expect(t.controller.error).toBeNull();
    expect(t.controller.busy).toBe(false);
    expect(t.api.loadMessages).not.toHaveBeenCalled();
    expect(t.onChanged).toHaveBeenCalled();
  });

  it("reloads a turn that ended before the host answered, and runs nothing afterwards", async () => {
    const t = setup();
    t.api.sendMessage.mockImplementation((_request, onEvent) => {
      onEvent({ type: "ended", status: "complete", saved: true });
      return Promise.resolve({ conversation: "c1", turn: "t1" });
    });
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Quick")]);
    await t.controller.send(choice, "Quick", []);
    expect(t.controller.turn).toBeNull();
    expect(t.controller.busy).toBe(false);
    await vi.waitFor(() => expect(t.api.loadMessages).toHaveBeenCalledWith("c1", null, PAGE));
    await vi.waitFor(() => expect(t.controller.chat.messages[0]?.id).toBe(1));
  });

  it("continues the opened conversation and does not announce it again", async () => {
    const t = setup();
    t.acceptTurns();
    t.api.loadMessages.mockResolvedValue([stored(1, "user", "Earlier")]);
    await t.controller.open("c1");
    await t.controller.send(choice, "More", []);
    expect(t.api.sendMessage.mock.calls[0]?.[0].conversation).toBe("c1");
    expect(t.onConversationStarted).not.toHaveBeenCalled();
    expect(shown(t.controller)).toEqual(["user/complete: Earlier", "user/complete: More"]);
  });

  it("says when a conversation does not load, unless a newer open overtook it", async () => {
    const t = setup();
    const slow = deferred<StoredMessage[]>();
    t.api.loadMessages.mockReturnValueOnce(slow.promise).mockResolvedValueOnce([stored(5, "user", "Newer")]);
    const first = t.controller.open("c1");
    await t.controller.open("c2");
    slow.resolve([stored(1, "user", "Stale")]);
    await first;
    expect(shown(t.controller)).toEqual(["user/complete: Newer"]);

    t.api.loadMessages.mockRejectedValueOnce(new Error("database is locked"));
    await t.controller.open("c3");
    expect(t.controller.error).toEqual({ message: "database is locked" });
    t.controller.dismissError();
    expect(t.controller.error).toBeNull();
  });

  it("pages back through older messages, keeping the reader's place, never during a turn", async () => {
    const t = setup();
    const page = Array.from({ length: PAGE }, (_, i) => stored(100 + i, "user", `m${100 + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c1");
    expect(t.controller.hasOlder).toBe(true);

    t.api.loadMessages.mockResolvedValueOnce([stored(98, "user", "m98"), stored(99, "user", "m99")]);
    await t.controller.loadOlder();
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c1", 100, PAGE);
    expect(t.scroll.keepPlace).toHaveBeenCalledTimes(1);
    expect(t.restorePlace).toHaveBeenCalledTimes(1);
    expect(t.controller.chat.messages).toHaveLength(PAGE + 2);
    expect(t.controller.chat.messages[0]?.id).toBe(98);
    expect(t.controller.hasOlder).toBe(false);

    // Nothing older: no more asking.
    await t.controller.loadOlder();
    expect(t.api.loadMessages).toHaveBeenCalledTimes(2);
  });

  it("does not page back while a turn runs, and shows a page that failed", async () => {
    const t = setup();
    const page = Array.from({ length: PAGE }, (_, i) => stored(100 + i, "user", `m${100 + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c1");
    t.acceptTurns({ conversation: "c1", turn: "t1" });
    await t.controller.send(choice, "More", []);
    await t.controller.loadOlder();
    expect(t.api.loadMessages).toHaveBeenCalledTimes(1);

    // A reader scrolled up: the reload after the turn asks for room for its new messages, and
    // finds them all (nothing moves under the reader).
    t.scroll.atEnd.mockReturnValue(false);
    const reloaded = Array.from({ length: PAGE + 4 }, (_, i) => stored(100 + i, "user", `m${100 + i}`));
    t.api.loadMessages.mockResolvedValueOnce(reloaded);
    t.emit({ type: "ended", status: "complete", saved: true });
    await vi.waitFor(() => expect(t.controller.chat.messages).toHaveLength(PAGE + 4));
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c1", null, PAGE + 4);
    expect(t.controller.hasOlder).toBe(true);
    t.api.loadMessages.mockRejectedValueOnce(new Error("database is locked"));
    await t.controller.loadOlder();
    expect(t.controller.error).toEqual({ message: "database is locked" });
  });

  it("pages back in another conversation while a turn runs in the first", async () => {
    const t = setup();
    const page = Array.from({ length: PAGE }, (_, i) => stored(100 + i, "user", `m${100 + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c1");
    t.acceptTurns({ conversation: "c1", turn: "t1" });
    await t.controller.send(choice, "Long job", []);
    expect(t.controller.busy).toBe(true);
    t.api.loadMessages.mockResolvedValueOnce(page);
    await t.controller.open("c2");
    t.api.loadMessages.mockResolvedValueOnce([stored(99, "user", "m99")]);
    await t.controller.loadOlder();
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c2", 100, PAGE);
    expect(t.controller.chat.messages[0]?.id).toBe(99);
    // Back in the running conversation: still not.
    await t.controller.open("c1");
    expect(t.controller.hasOlder).toBe(true);
    const calls = t.api.loadMessages.mock.calls.length;
    await t.controller.loadOlder();
    expect(t.api.loadMessages.mock.calls.length).toBe(calls);
  });

  it("keeps only the newest page of a long conversation once a turn ends at the newest message", async () => {
    const t = setup();
    const page = (from: number, length: number) =>
      Array.from({ length }, (_, i) => stored(from + i, "user", `m${from + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page(100, PAGE));
    await t.controller.open("c1");
    // The reader pages back twice: three pages are in the window.
    t.api.loadMessages.mockResolvedValueOnce(page(50, PAGE)).mockResolvedValueOnce(page(0, PAGE));
    await t.controller.loadOlder();
    await t.controller.loadOlder();
    expect(t.controller.chat.messages).toHaveLength(3 * PAGE);

    // Back at the newest message, a turn ends: the window moves on to the newest page only.
    t.acceptTurns({ conversation: "c1", turn: "t1" });
    await t.controller.send(choice, "More", []);
    const oldState = t.controller.chat;
    t.api.loadMessages.mockResolvedValueOnce(page(104, PAGE));
    t.emit({ type: "ended", status: "complete", saved: true });
    await vi.waitFor(() => expect(t.controller.chat.messages[0]?.id).toBe(104));
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c1", null, PAGE);
    expect(t.controller.chat.messages).toHaveLength(PAGE);
    expect(t.controller.chat).not.toBe(oldState);
    expect(t.controller.hasOlder).toBe(true);

    // "Show earlier messages" brings the older ones back, from the oldest now shown.
    t.api.loadMessages.mockResolvedValueOnce(page(54, PAGE));
    await t.controller.loadOlder();
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c1", 104, PAGE);
    expect(t.controller.chat.messages[0]?.id).toBe(54);
  });

  it("puts a page of older messages only above the conversation it was asked for", async () => {
    const t = setup();
    const page = (from: number, length: number) =>
      Array.from({ length }, (_, i) => stored(from + i, "user", `m${from + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page(100, PAGE));
    await t.controller.open("c1");
    const slow = deferred<StoredMessage[]>();
    t.api.loadMessages.mockReturnValueOnce(slow.promise).mockResolvedValueOnce([stored(900, "user", "In B")]);
    const older = t.controller.loadOlder();
    await t.controller.open("c2");
    slow.resolve(page(50, PAGE));
    await older;
    expect(shown(t.controller)).toEqual(["user/complete: In B"]);
  });

  it("asks for at most what the host gives at once after a turn, and can still page back", async () => {
    const t = setup();
    const page = (from: number, length: number) =>
      Array.from({ length }, (_, i) => stored(from + i, "user", `m${from + i}`));
    t.api.loadMessages.mockResolvedValueOnce(page(1000, PAGE));
    await t.controller.open("c1");
    // The reader paged back ten times: 550 messages are in the window.
    for (let n = 1; n <= 10; n++) {
      t.api.loadMessages.mockResolvedValueOnce(page(1000 - n * PAGE, PAGE));
      await t.controller.loadOlder();
    }
    expect(t.controller.chat.messages).toHaveLength(11 * PAGE);
    t.acceptTurns({ conversation: "c1", turn: "t1" });
    await t.controller.send(choice, "More", []);
    t.scroll.atEnd.mockReturnValue(false);
    t.api.loadMessages.mockResolvedValueOnce(page(554, MOST_LOADED));
    t.emit({ type: "ended", status: "complete", saved: true });
    await vi.waitFor(() => expect(t.controller.chat.messages[0]?.id).toBe(554));
    expect(t.api.loadMessages).toHaveBeenLastCalledWith("c1", null, MOST_LOADED);
    expect(t.controller.hasOlder).toBe(true);
  });

  it("opens a link through the host and shows a refusal", async () => {
    const t = setup();
    t.api.openExternal.mockRejectedValue(new Error("only http and https links open"));
    t.controller.openLink("file:///etc/passwd");
    expect(t.api.openExternal).toHaveBeenCalledWith("file:///etc/passwd");
    await vi.waitFor(() => expect(t.controller.error?.message).toBe("only http and https links open"));
  });
});

describe("commandError", () => {
  it("keeps a known action and drops anything else", () => {
    expect(commandError({ message: "no key", action: "open_settings" })).toEqual({ message: "no key", action: "open_settings" });
    expect(commandError({ message: "no key", action: "run_script" })).toEqual({ message: "no key", action: undefined });
    expect(commandError("plain text")).toEqual({ message: "plain text" });
    expect(commandError(new Error("thrown"))).toEqual({ message: "thrown", action: undefined });
  });
});
