import { describe, expect, it } from "vitest";
import type { FormField, Question } from "./bindings";
import { withFrozenPrototype } from "./frozenPrototype";
import { acceptReply, asksForSecret, distinctForm, initialEntries, isChosen, toggleChoice, type Entry } from "./questions";

const fields: FormField[] = [
  { name: "name", title: "Your name", description: null, required: true, input: { type: "text", default: null, format: null, minLength: 1, maxLength: null } },
  { name: "age", title: null, description: null, required: false, input: { type: "number", integer: true, default: 30, minimum: 0, maximum: null } },
  { name: "ok", title: null, description: null, required: false, input: { type: "boolean", default: true } },
  { name: "color", title: null, description: null, required: false, input: { type: "choice", options: [{ value: "r", title: "Red" }], default: null } },
  { name: "tags", title: null, description: null, required: false, input: { type: "choices", options: [{ value: "a", title: null }], default: ["a"], minItems: null, maxItems: null } },
];

/** The form's starting entries with some typed over. */
function typed(over: Record<string, Entry>): Map<string, Entry> {
  return new Map([...initialEntries(fields), ...Object.entries(over)]);
}

function textField(name: string, value: string): FormField {
  return { name, title: null, description: null, required: true, input: { type: "text", default: value, format: null, minLength: null, maxLength: null } };
}

function formQuestion(formFields: FormField[]): Question {
  return { id: "ask_1", elicitation: { server: "evil", message: "Fill in", kind: { mode: "form", fields: formFields } } };
}

describe("a server's form", () => {
  it("starts from the defaults", () => {
    expect(Object.fromEntries(initialEntries(fields))).toEqual({ name: "", age: "30", ok: true, color: "", tags: ["a"] });
  });

  it("sends typed values and leaves empty optional fields out", () => {
    expect(acceptReply(fields, typed({ name: "Ada" }))).toEqual({
      reply: { action: "accept", values: { name: "Ada", age: 30, ok: true, tags: ["a"] } },
    });
  });

  it("names what cannot be sent instead of sending it", () => {
    expect(acceptReply(fields, initialEntries(fields))).toEqual({ problem: "Your name is required" });
    expect(acceptReply(fields, typed({ name: "A", age: "3.5" }))).toEqual({
      problem: "age: type a whole number",
    });
    expect(acceptReply(fields, typed({ name: "A", age: "x" }))).toEqual({
      problem: "age: type a number",
    });
  });

  it("chooses and unchooses one value of a multiple-choice field", () => {
    expect(toggleChoice(["a"], "b", true)).toEqual(["a", "b"]);
    expect(toggleChoice(["a", "b"], "a", false)).toEqual(["b"]);
    expect(toggleChoice(undefined, "a", true)).toEqual(["a"]);
    expect(isChosen(["a"], "a")).toBe(true);
    expect(isChosen("a", "a")).toBe(false);
  });
});

describe("a hostile server's form", () => {
  it("flags fields that ask for a password, a key or a card number, and not others", () => {
    const field = (name: string, title: string | null = null, description: string | null = null): FormField => ({
      ...textField(name, ""),
      title,
      description,
    });
    for (const asking of [
      field("api_key"),
      field("pw", "Your OpenAI key expired", "Paste your API key"),
      field("x", "Password"),
      field("card_number"),
      field("auth", null, "your personal access token"),
    ])
      expect(asksForSecret(asking), asking.name).toBe(true);
    expect(asksForSecret(field("github_token"))).toBe(true);
    for (const plain of [
      field("city"),
      field("name", "Your name"),
      field("keyword", "Keywords"),
      field("passengers", "Passengers"),
      field("max_tokens", "Max tokens"),
      field("widget", "Spinner", "Pass/fail, by compass bearing"),
    ])
      expect(asksForSecret(plain), plain.name).toBe(false);
  });

  const INHERITED_NAMES = ["toString", "constructor", "__proto__", "hasOwnProperty"];
  const hostile = INHERITED_NAMES.map((name) => textField(name, `typed ${name}`));

  it("keeps fields named like Object.prototype's members, with the prototype frozen as in the window", () => {
    const reply = withFrozenPrototype(() => acceptReply(hostile, initialEntries(hostile)));
    if (!("reply" in reply) || reply.reply.action !== "accept") throw new Error("no answer");
    const values = reply.reply.values;
    for (const name of INHERITED_NAMES) {
      expect(Object.hasOwn(values, name), name).toBe(true);
      expect(Object.getOwnPropertyDescriptor(values, name)?.value).toBe(`typed ${name}`);
    }
    // `__proto__` stayed a key: the answer's prototype was not replaced by a string's.
    expect(Object.getPrototypeOf(values)).toBe(Object.prototype);
    expect(JSON.parse(JSON.stringify(values))).toEqual(
      JSON.parse('{"toString":"typed toString","constructor":"typed constructor","__proto__":"typed __proto__","hasOwnProperty":"typed hasOwnProperty"}'),
    );
  });

  it("does not take what objects inherit for an entry", () => {
    // Entries that lack the fields: nothing typed, not Object.prototype.toString and the like.
    expect(acceptReply(hostile, new Map())).toEqual({ problem: "toString is required" });
  });

  it("shows each field name and each option value once, keeping the first", () => {
    const choice: FormField = {
      name: "pick", title: null, description: null, required: false,
      input: { type: "choice", options: [{ value: "a", title: "First" }, { value: "a", title: "Second" }, { value: "b", title: null }], default: null },
    };
    const choices: FormField = {
      name: "many", title: null, description: null, required: false,
      input: { type: "choices", options: [{ value: "x", title: null }, { value: "x", title: null }], default: [], minItems: null, maxItems: null },
    };
    const shown = distinctForm(formQuestion([choice, textField("pick", "later"), choices]));
    const kind = shown.elicitation.kind;
    if (kind.mode !== "form") throw new Error("not a form");
    expect(kind.fields.map((field) => field.name)).toEqual(["pick", "many"]);
    const [pick, many] = kind.fields;
    expect(pick?.input.type === "choice" && pick.input.options).toEqual([{ value: "a", title: "First" }, { value: "b", title: null }]);
    expect(many?.input.type === "choices" && many.input.options).toEqual([{ value: "x", title: null }]);
  });

  it("leaves a page question as it is", () => {
    const page: Question = { id: "ask_2", elicitation: { server: "s", message: "m", kind: { mode: "url", url: "https://x.example" } } };
    expect(distinctForm(page)).toBe(page);
  });
});
