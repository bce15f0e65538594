// How much the model is asked to think before it answers: the composer's "Thinking" list,
// kept in the webview's storage so it stays picked after a restart.

import type { ReasoningEffort } from "./types";

const KEY = "conduit-thinking";

/** The levels the list offers, after "Default" (the model's own). */
export const THINKING_LEVELS: readonly ReasoningEffort[] = ["low", "medium", "high"];

/** The level kept, or null (the model's default) when none or an unknown one is. */
export function savedThinking(storage: Pick<Storage, "getItem">): ReasoningEffort | null {
  return thinkingOf(storage.getItem(KEY) ?? "");
}

/** Keeps `level` (null: the model's default) for the next start. */
export function saveThinking(storage: Pick<Storage, "setItem" | "removeItem">, level: ReasoningEffort | null): void {
  if (level === null) storage.removeItem(KEY);
  else storage.setItem(KEY, level);
}

/** The list's value for `level` and back: "" is the model's default. */
export function thinkingValue(level: ReasoningEffort | null): string {
  return level ?? "";
}

export function thinkingOf(value: string): ReasoningEffort | null {
  return THINKING_LEVELS.find((level) => level === value) ?? null;
}

/** What the list says of a level. */
export function thinkingLabel(level: ReasoningEffort | null): string {
  switch (level) {
    case null:
      return "Default";
    case "low":
      return "Low";
    case "medium":
      return "Medium";
    case "high":
      return "High";
  }
}
