// A server's question (elicitation) as a form in the window: what each field starts with,
// and the typed values the user's entries become. The host checks the answer against the
// server's schema; this only shapes what the user typed.
import type { FieldInput, FormField, QuestionReply } from "./bindings";

/** What a field holds while the user edits it. */
export type Entry = string | boolean | string[];

/** Each field's starting entry: its default, or empty. */
export function initialEntries(fields: FormField[]): Record<string, Entry> {
  const entries: Record<string, Entry> = {};
  for (const field of fields) {
    entries[field.name] = initialEntry(field.input);
  }
  return entries;
}

function initialEntry(input: FieldInput): Entry {
  switch (input.type) {
    case "text":
    case "choice":
      return input.default ?? "";
    case "number":
      return input.default === null ? "" : String(input.default);
    case "boolean":
      return input.default ?? false;
    case "choices":
      return [...input.default];
  }
}

/** The entries as the values to send, or the first entry that cannot be one. */
export function valuesOf(
  fields: FormField[],
  entries: Record<string, Entry>,
): { values: Record<string, unknown> } | { problem: string } {
  const values: Record<string, unknown> = {};
  for (const field of fields) {
    const entry = entries[field.name];
    const label = field.title ?? field.name;
    const input = field.input;
    switch (input.type) {
      case "text":
      case "choice": {
        const text = typeof entry === "string" ? entry : "";
        if (text !== "") values[field.name] = text;
        else if (field.required) return { problem: `${label} is required` };
        break;
      }
      case "number": {
        const text = typeof entry === "string" ? entry.trim() : "";
        if (text === "") {
          if (field.required) return { problem: `${label} is required` };
          break;
        }
        const number = Number(text);
        if (!Number.isFinite(number)) return { problem: `${label}: type a number` };
        if (input.integer && !Number.isInteger(number)) {
          return { problem: `${label}: type a whole number` };
        }
        values[field.name] = number;
        break;
      }
      case "boolean":
        values[field.name] = entry === true;
        break;
      case "choices": {
        const chosen = Array.isArray(entry) ? entry : [];
        if (chosen.length > 0 || field.required) values[field.name] = chosen;
        break;
      }
    }
  }
  return { values };
}

/** The reply for a filled-in form, or the problem to show instead of sending. */
export function acceptReply(
  fields: FormField[],
  entries: Record<string, Entry>,
): { reply: QuestionReply } | { problem: string } {
  const shaped = valuesOf(fields, entries);
  if ("problem" in shaped) return shaped;
  return { reply: { action: "accept", values: shaped.values } };
}
