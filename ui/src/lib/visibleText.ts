/** Untrusted text as a person should read it: what hides or rearranges text is shown as its code. */
import { HIDING_CHARACTER_CLASS } from "./hidingCharacters";

const hiding = new RegExp(HIDING_CHARACTER_CLASS, "gu");

/** Characters that stay as they are in text meant to span lines. */
const LAYOUT = new Set(["\n", "\t"]);

/**
 * `text` with each character that hides or rearranges text (the host's list: controls, bidi
 * overrides, zero-width and tag characters) shown as its code, `\u{202e}`, as the host shows
 * them in its own dialogs: a name or argument that reads one way on screen and another to the
 * tool is seen for what it is. `keepLines` keeps line breaks and tabs (a message, pretty JSON).
 */
export function visible(text: string, { keepLines = false }: { keepLines?: boolean } = {}): string {
  return text.replace(hiding, (c) =>
    keepLines && LAYOUT.has(c) ? c : `\\u{${(c.codePointAt(0) ?? 0).toString(16)}}`,
  );
}

/** A value as indented JSON, with what hides shown as its code. */
export function visibleJson(value: unknown): string {
  return visible(JSON.stringify(value, null, 2) ?? String(value), { keepLines: true });
}
