// A server's question (elicitation) as a form in the window: what each field starts with,
// and the typed values the user's entries become. The host checks the answer against the
// server's schema; this only shapes what the user typed.
//
// Field names and option values are the server's: entries are kept in a Map, never as keys of
// a plain object, where `toString` or `__proto__` would find (or, with Object.prototype frozen
// by tauri.conf.json's freezePrototype, throw on) what every object inherits.
import type { FieldInput, FormField, Question, QuestionReply } from "./bindings";
import { uniqueBy } from "./unique";

/** Words in a field's name, title or description that ask for a secret. */
// Whole words, an underscore or a dash counting as a break (`github_token`), so that
// "passengers", "Max tokens" or "Spinner" are not.
const SECRET_WORDS =
  /(?<![a-z])(pass(word|phrase|code)|pin|api[\s_-]?key|secret|token|credentials?|private[\s_-]?key|card[\s_-]?(number|no)|cvv|cvc|ssn|social security|seed phrase|recovery phrase)(?![a-z])/i;

/**
 * Whether a server's field asks for a secret (a password, a key, a card number). The spec
 * forbids servers to ask for these in a form; one that does is phishing in Conduit's
 * window, so the field is flagged as the server's, not Conduit's.
 */
export function asksForSecret(field: FormField): boolean {
  return [field.name, field.title ?? "", field.description ?? ""].some((text) => SECRET_WORDS.test(text));
}

/** What a field holds while the user edits it. */
export type Entry = string | boolean | string[];

/**
 * The question as the window shows it: a form without a second field of the same name or a
 * second option of the same value (the first is kept), since the form lists them keyed.
 */
export function distinctForm(question: Question): Question {
  const kind = question.elicitation.kind;
  if (kind.mode !== "form") return question;
  const fields = uniqueBy(kind.fields, (field) => field.name).map(distinctOptions);
  return { ...question, elicitation: { ...question.elicitation, kind: { ...kind, fields } } };
}

function distinctOptions(field: FormField): FormField {
  const input = field.input;
  if (input.type !== "choice" && input.type !== "choices") return field;
  return { ...field, input: { ...input, options: uniqueBy(input.options, (option) => option.value) } };
}

/** Each field's starting entry, by the field's name: its default, or empty. */
export function initialEntries(fields: FormField[]): Map<string, Entry> {
  return new Map(fields.map((field) => [field.name, initialEntry(field.input)]));
}

/** Whether a multiple-choice field's entry has `value` chosen. */
export function isChosen(entry: Entry | undefined, value: string): boolean {
  return Array.isArray(entry) && entry.includes(value);
}

/** A multiple-choice field's entry with `value` chosen or not. */
export function toggleChoice(entry: Entry | undefined, value: string, on: boolean): string[] {
  const others = (Array.isArray(entry) ? entry : []).filter((chosen) => chosen !== value);
  return on ? [...others, value] : others;
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
  entries: ReadonlyMap<string, Entry>,
): { values: Record<string, unknown> } | { problem: string } {
  const values = new Map<string, unknown>();
  for (const field of fields) {
    const entry = entries.get(field.name);
    const label = field.title ?? field.name;
    const input = field.input;
    switch (input.type) {
      case "text":
      case "choice": {
        const text = typeof entry === "string" ? entry : "";
        if (text !== "") values.set(field.name, text);
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
        values.set(field.name, number);
        break;
      }
      case "boolean":
        values.set(field.name, entry === true);
        break;
      case "choices": {
        const chosen = Array.isArray(entry) ? entry : [];
        if (chosen.length > 0 || field.required) values.set(field.name, chosen);
        break;
      }
    }
  }
  // Object.fromEntries defines own properties, so a field named `__proto__` or `toString`
  // reaches the host as the answer's own key.
  return { values: Object.fromEntries(values) };
}

/** The reply for a filled-in form, or the problem to show instead of sending. */
export function acceptReply(
  fields: FormField[],
  entries: ReadonlyMap<string, Entry>,
): { reply: QuestionReply } | { problem: string } {
  const shaped = valuesOf(fields, entries);
  if ("problem" in shaped) return shaped;
  return { reply: { action: "accept", values: shaped.values } };
}
