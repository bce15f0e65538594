import { describe, expect, it } from "vitest";
import type { FormField } from "./bindings";
import { acceptReply, initialEntries } from "./questions";

const fields: FormField[] = [
  { name: "name", title: "Your name", description: null, required: true, input: { type: "text", default: null, format: null, minLength: 1, maxLength: null } },
  { name: "age", title: null, description: null, required: false, input: { type: "number", integer: true, default: 30, minimum: 0, maximum: null } },
  { name: "ok", title: null, description: null, required: false, input: { type: "boolean", default: true } },
  { name: "color", title: null, description: null, required: false, input: { type: "choice", options: [{ value: "r", title: "Red" }], default: null } },
  { name: "tags", title: null, description: null, required: false, input: { type: "choices", options: [{ value: "a", title: null }], default: ["a"], minItems: null, maxItems: null } },
];

describe("a server's form", () => {
  it("starts from the defaults", () => {
    expect(initialEntries(fields)).toEqual({ name: "", age: "30", ok: true, color: "", tags: ["a"] });
  });

  it("sends typed values and leaves empty optional fields out", () => {
    const entries = { ...initialEntries(fields), name: "Ada" };
    expect(acceptReply(fields, entries)).toEqual({
      reply: { action: "accept", values: { name: "Ada", age: 30, ok: true, tags: ["a"] } },
    });
  });

  it("names what cannot be sent instead of sending it", () => {
    expect(acceptReply(fields, initialEntries(fields))).toEqual({ problem: "Your name is required" });
    expect(acceptReply(fields, { ...initialEntries(fields), name: "A", age: "3.5" })).toEqual({
      problem: "age: type a whole number",
    });
    expect(acceptReply(fields, { ...initialEntries(fields), name: "A", age: "x" })).toEqual({
      problem: "age: type a number",
    });
  });
});
