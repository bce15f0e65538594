import { describe, expect, it } from "vitest";
import { emptyFields, entryFromFields, fieldsFromEntry } from "./McpEntry";

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
});
