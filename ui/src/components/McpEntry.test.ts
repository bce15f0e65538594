import { describe, expect, it } from "vitest";
import { withFrozenPrototype } from "../lib/frozenPrototype";
import { emptyFields, entryFromFields, fieldsFromEntry, fieldsProblem } from "./McpEntry";

describe("the server form's transport", () => {
  it("comes from what the host reports, not from the entry's type spelling", () => {
    // An alias the window does not know itself: the host's answer decides.
    const entry = { type: "someFutureHttpAlias", url: "https://h.example/mcp" };
    expect(fieldsFromEntry({ entry, transport: "http" }).transport).toBe("http");
    expect(fieldsFromEntry({ entry: { command: "x" }, transport: "stdio" }).transport).toBe("stdio");
    expect(fieldsFromEntry({ entry: { args: [] }, transport: null }).transport).toBe("stdio");
  });

  it("keeps another app's spelling of the HTTP type when saving an HTTP server", () => {
    const base = { entry: { type: "sse", url: "https://old.example/sse", note: 1 }, transport: "http" as const };
    const fields = { ...fieldsFromEntry(base), url: "https://new.example/sse" };
    expect(entryFromFields(base, fields)).toEqual({ type: "sse", url: "https://new.example/sse", note: 1 });
  });

  it("writes type http when a stdio server becomes an HTTP one, or a new one is HTTP", () => {
    const base = { entry: { type: "stdio", command: "x" }, transport: "stdio" as const };
    const fields = { ...fieldsFromEntry(base), transport: "http" as const, url: "https://h.example/mcp" };
    expect(entryFromFields(base, fields)).toEqual({ type: "http", url: "https://h.example/mcp" });
    const fresh = { ...emptyFields(), transport: "http" as const, url: "https://h.example/mcp" };
    expect(entryFromFields(undefined, fresh)).toEqual({ type: "http", url: "https://h.example/mcp" });
  });

  it("reads and writes an entry's roots, in place, and leaves them out when none are left", () => {
    const base = { entry: { command: "x", roots: ["~/code", "/data"], timeout: 5 }, transport: "stdio" as const };
    const fields = fieldsFromEntry(base);
    expect(fields.roots).toEqual(["~/code", "/data"]);
    expect(entryFromFields(base, { ...fields, roots: [" /srv ", ""] })).toEqual({ command: "x", args: [], roots: ["/srv"], timeout: 5 });
    expect(entryFromFields(base, { ...fields, roots: [] })).toEqual({ command: "x", args: [], timeout: 5 });
    expect(fieldsProblem({ ...fields, roots: ["relative/dir"] })).toBe("The root relative/dir must be an absolute folder or start with ~/.");
    expect(fieldsProblem({ ...fields, roots: ["~", "~/x", "/y"] })).toBeNull();
  });
});

describe("an entry with names objects inherit", () => {
  it("keeps them as its own keys, with the prototype frozen as in the window", () => {
    const written = JSON.parse(
      '{"command":"npx","toString":"kept","__proto__":{"kept":true},"env":{"constructor":"1","__proto__":"2"}}',
    ) as Record<string, unknown>;
    const server = { entry: written, transport: "stdio" as const };
    const entry = withFrozenPrototype(() => entryFromFields(server, fieldsFromEntry(server)));
    expect(Object.getPrototypeOf(entry)).toBe(Object.prototype);
    expect(Object.keys(entry)).toEqual(["command", "toString", "__proto__", "env", "args"]);
    expect(Object.getOwnPropertyDescriptor(entry, "__proto__")?.value).toEqual(JSON.parse('{"kept":true}'));
    const env = entry.env as Record<string, string>;
    expect(Object.entries(env)).toEqual([["constructor", "1"], ["__proto__", "2"]]);
  });
});
