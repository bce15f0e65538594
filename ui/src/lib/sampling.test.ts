import { describe, expect, it } from "vitest";
import type { SamplingRequest } from "./bindings";
import { contentText, imageOrdinals, initialPick, pickOf, pickValue, preferences, requestCharacters, stopText, viewerImages } from "./sampling";

const request: SamplingRequest = {
  server: "weather",
  messages: [],
  systemPrompt: null,
  tools: [],
  toolChoice: "auto",
  modelHints: ["claude", "gpt"],
  costPriority: 0.25,
  speedPriority: null,
  intelligencePriority: 0.9,
  maxTokens: 100,
  includeContext: null,
  temperature: null,
  stopSequences: [],
};

describe("a sampling request as the chat shows it", () => {
  it("counts every text the model reads, tool schemas included, and not image bytes", () => {
    const counted = requestCharacters({
      ...request,
      systemPrompt: "abc👍",
      stopSequences: ["END"],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "12345" },
            { type: "image", mimeType: "image/png", bytes: 1_000_000 },
          ],
        },
        {
          role: "assistant",
          content: [{ type: "toolUse", id: "t", name: "go", input: { a: 1 } }],
        },
        {
          role: "user",
          content: [{ type: "toolResult", toolUseId: "t", text: "done", isError: false }],
        },
      ],
      tools: [{ name: "go", description: "Goes", inputSchema: { hidden: "instructions" } }],
    });
    // abc👍 (an emoji is one character) + 12345 + go + {"a":1} + done + go + Goes +
    // {"hidden":"instructions"}; not the stop sequences, which are settings.
    expect(counted).toBe(4 + 5 + 2 + 7 + 4 + 2 + 4 + 25);
  });

  it("numbers the images through the messages in order, as the host serves them", () => {
    const image = { type: "image" as const, mimeType: "image/png", bytes: 1 };
    const text = { type: "text" as const, text: "t" };
    expect(
      imageOrdinals({
        ...request,
        messages: [
          { role: "user", content: [text, image, image] },
          { role: "assistant", content: [text] },
          { role: "user", content: [image, text] },
        ],
      }),
    ).toEqual([[null, 0, 1], [null], [2, null]]);
  });

  it("gives the viewer each image drawn whole, in the host's order, with the format it came in", () => {
    const image = (mimeType: string) => ({ type: "image" as const, mimeType, bytes: 1 });
    const text = { type: "text" as const, text: "t" };
    expect(
      viewerImages("sample 1", {
        ...request,
        messages: [
          { role: "user", content: [text, image("image/png")] },
          { role: "assistant", content: [text] },
          { role: "user", content: [image("image/jpeg"), text] },
        ],
      }),
    ).toEqual([
      { src: "media://localhost/sampling/sample%201/0/whole", mime: "image/png" },
      { src: "media://localhost/sampling/sample%201/1/whole", mime: "image/jpeg" },
    ]);
    expect(viewerImages("s", request)).toEqual([]);
  });

  it("reads every kind of content as a line", () => {
    expect(contentText({ type: "text", text: "hi" })).toBe("hi");
    expect(contentText({ type: "image", mimeType: "image/png", bytes: 12 })).toBe("[image, image/png, 12 bytes]");
    expect(contentText({ type: "toolUse", id: "t", name: "forecast", input: { city: "Oslo" } })).toBe(
      'Asks the server to run forecast with {"city":"Oslo"}',
    );
    expect(contentText({ type: "toolResult", toolUseId: "t", text: "3C", isError: true })).toBe("Error from a tool: 3C");
  });

  it("says the server's preferences and why the model stopped", () => {
    expect(preferences(request)).toBe("models like “claude”, “gpt”; cost 25%; intelligence 90%");
    expect(preferences({ ...request, modelHints: [], costPriority: null, intelligencePriority: null })).toBeNull();
    expect(stopText("toolUse")).toBe("asks for a tool");
    expect(stopText({ other: "refusal" })).toBe("refusal");
  });

  it("starts the picker on the chat's model when offered, else the first one", () => {
    const groups = [
      { provider: "a", models: ["a1"] },
      { provider: "b", models: ["b1", "b2"] },
    ];
    expect(initialPick(groups, { provider: "b", model: "b2" })).toEqual({ provider: "b", model: "b2" });
    expect(initialPick(groups, { provider: "gone", model: "x" })).toEqual({ provider: "a", model: "a1" });
    expect(initialPick([], null)).toBeNull();
    expect(pickOf(pickValue({ provider: "b", model: "b2" }))).toEqual({ provider: "b", model: "b2" });
    expect(pickOf("nonsense")).toBeNull();
  });
});
