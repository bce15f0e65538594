// A server's sampling request in the chat: how each piece of it reads, and which provider
// and model the picker starts on. The host decides what runs; this only shapes the view.
import { samplingImageUrl } from "./api";
import { visible } from "./visibleText";
import type { ModelPick, SamplingContent, SamplingRequest, SamplingStop } from "./bindings";
import type { DrawnImage } from "./imageView";
import type { ModelChoice, ModelGroup } from "./types";

/** One piece of a message or result, as a line the user reads. */
export function contentText(content: SamplingContent): string {
  switch (content.type) {
    case "text":
      return content.text;
    case "image":
      return `[image, ${content.mimeType}, ${content.bytes} bytes]`;
    case "audio":
      return `[audio, ${content.mimeType}, ${content.bytes} bytes]`;
    case "toolUse":
      return `Asks the server to run ${content.name} with ${JSON.stringify(content.input)}`;
    case "toolResult":
      return `${content.isError ? "Error from" : "Result of"} a tool: ${content.text}`;
  }
}

/**
 * Each content piece's place among the request's images, by message and then piece (null
 * for what is no image): the host serves the `n`th image of a request by that place.
 */
export function imageOrdinals(request: SamplingRequest): (number | null)[][] {
  let next = 0;
  return request.messages.map((message) =>
    message.content.map((content) => (content.type === "image" ? next++ : null)),
  );
}

/**
 * The request's images as the full-window viewer shows them, in the order the host serves
 * them: each drawn whole by the host, never the server's bytes.
 */
export function viewerImages(requestId: string, request: SamplingRequest): DrawnImage[] {
  // One numbering rule for the review and the viewer: imageOrdinals.
  const ordinals = imageOrdinals(request);
  return request.messages.flatMap((message, index) =>
    message.content.flatMap((content, part) => {
      const ordinal = ordinals[index]?.[part] ?? null;
      return content.type === "image" && ordinal !== null
        ? [{ src: samplingImageUrl(requestId, ordinal, true), mime: content.mimeType }]
        : [];
    }),
  );
}

/**
 * How much text the request sends to the model, in characters: the system prompt, every
 * message's text (tool uses and results included), and each tool's name, description and
 * input schema (which the model reads as instructions too).
 */
export function requestCharacters(request: SamplingRequest): number {
  const texts: string[] = [request.systemPrompt ?? ""];
  for (const message of request.messages) {
    for (const content of message.content) {
      if (content.type === "text") texts.push(content.text);
      if (content.type === "toolUse") texts.push(content.name, JSON.stringify(content.input));
      if (content.type === "toolResult") texts.push(content.text);
    }
  }
  for (const tool of request.tools) {
    texts.push(tool.name, tool.description ?? "", JSON.stringify(tool.inputSchema));
  }
  return texts.reduce((sum, text) => sum + [...text].length, 0);
}

/** What the server prefers, in words (hints and priorities), or null when it said nothing. */
export function preferences(request: SamplingRequest): string | null {
  const parts: string[] = [];
  // The server's words: quoted, their hidden characters shown.
  if (request.modelHints.length > 0)
    parts.push(`models like ${request.modelHints.map((hint) => `“${visible(hint)}”`).join(", ")}`);
  const priority = (name: string, value: number | null): void => {
    if (value !== null) parts.push(`${name} ${Math.round(value * 100)}%`);
  };
  priority("cost", request.costPriority);
  priority("speed", request.speedPriority);
  priority("intelligence", request.intelligencePriority);
  return parts.length > 0 ? parts.join("; ") : null;
}

/** Why the model stopped, in words. */
export function stopText(stop: SamplingStop): string {
  if (typeof stop === "object") return stop.other;
  return { endTurn: "finished", maxTokens: "hit the token limit", toolUse: "asks for a tool", stopSequence: "hit a stop sequence" }[stop];
}

const SEPARATOR = "\u0000";

/** The picker's value for a pick. */
export function pickValue(pick: ModelChoice): string {
  return `${pick.provider}${SEPARATOR}${pick.model}`;
}

/** The pick a picker value names, or null. */
export function pickOf(value: string): ModelPick | null {
  const [provider, model] = value.split(SEPARATOR);
  return provider && model ? { provider, model } : null;
}

/**
 * The picker's first choice: the chat's own provider and model when the groups offer it,
 * else the first model offered, else none.
 */
export function initialPick(groups: ModelGroup[], choice: ModelChoice | null): ModelChoice | null {
  if (choice && groups.some((g) => g.provider === choice.provider && g.models.includes(choice.model))) return choice;
  for (const group of groups) {
    const model = group.models[0];
    if (model !== undefined) return { provider: group.provider, model };
  }
  return null;
}
