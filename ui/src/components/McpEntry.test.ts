import { describe, expect, it } from "vitest";
import { withFrozenPrototype } from "../lib/frozenPrototype";
import type { McpFileServer } from "../lib/types";
import { addedRow, emptyFields, entryFromFields, fieldsFromEntry, fieldsProblem, type ListRow, type ServerFields } from "./McpEntry";

/** Rows the user added with "Add argument" or "Add root" and typed these values into. */
function typed(...values: string[]): ListRow[] {
  return values.map((value) => ({ ...addedRow(), value }));
}

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

  it("reads and writes an entry's roots, in place, and leaves them out when the user removes them all", () => {
    const base = { entry: { command: "x", roots: ["~/code", "/data"], timeout: 5 }, transport: "stdio" as const };
    const fields = fieldsFromEntry(base);
    expect(fields.roots.map((row) => row.value)).toEqual(["~/code", "/data"]);
    expect(entryFromFields(base, { ...fields, roots: typed(" /srv ", "") })).toEqual({ command: "x", roots: ["/srv"], timeout: 5 });
    expect(entryFromFields(base, { ...fields, roots: [] })).toEqual({ command: "x", timeout: 5 });
    expect(fieldsProblem({ ...fields, roots: typed("relative/dir") })).toBe("The root relative/dir must be an absolute folder or start with ~/.");
    expect(fieldsProblem({ ...fields, roots: typed("~", "~/x", "/y") })).toBeNull();
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
    expect(Object.keys(entry)).toEqual(["command", "toString", "__proto__", "env"]);
    expect(Object.getOwnPropertyDescriptor(entry, "__proto__")?.value).toEqual(JSON.parse('{"kept":true}'));
    const env = entry.env as Record<string, string>;
    expect(Object.entries(env)).toEqual([["constructor", "1"], ["__proto__", "2"]]);
  });
});

describe("saving the form after changing one field", () => {
  // Everything the form shows, as other apps and hand edits write it: an empty argument,
  // `type` spelled out, roots declared with none offered, spaces around command and cwd, a
  // non-string value, and fields the form does not know.
  const written = {
    type: "stdio",
    command: "  npx ",
    args: ["--prefix", "", "server-files"],
    env: { DEBUG: "1", TOKEN: "${TOKEN}", PORT: 8080 },
    cwd: " /srv/app ",
    roots: [],
    timeout: 30,
    disabled: false,
    someFutureField: { keep: [1, "two"] },
  };
  const base = { entry: written, transport: "stdio" as const };

  /** The entry a save of `change(fields)` writes. */
  function saved(change: (fields: ServerFields) => void, server: Pick<McpFileServer, "entry" | "transport"> = base) {
    const fields = fieldsFromEntry(server);
    change(fields);
    return entryFromFields(server, fields);
  }

  /** Equal in JSON terms, key order included. */
  function expectWritten(entry: Record<string, unknown>, expected: Record<string, unknown>): void {
    expect(JSON.stringify(entry)).toBe(JSON.stringify(expected));
  }

  it("writes the entry back unchanged when nothing was changed", () => {
    expectWritten(saved(() => {}), written);
  });

  it("changes only the env value the user changed", () => {
    const entry = saved((fields) => {
      const debug = fields.env.find((pair) => pair.key === "DEBUG");
      if (debug) debug.value = "0";
    });
    expectWritten(entry, { ...written, env: { DEBUG: "0", TOKEN: "${TOKEN}", PORT: 8080 } });
  });

  it("keeps the command, cwd, type, args and roots as written when another field changes", () => {
    const entry = saved((fields) => fields.env.push({ key: "TZ", value: "UTC" }));
    expectWritten(entry, { ...written, env: { ...written.env, TZ: "UTC" } });
    expect(entry.command).toBe("  npx ");
    expect(entry.cwd).toBe(" /srv/app ");
    expect(entry.type).toBe("stdio");
    expect(entry.args).toEqual(["--prefix", "", "server-files"]);
    expect(entry.roots).toEqual([]);
  });

  it("trims the command and cwd the user typed, and only those", () => {
    expectWritten(
      saved((fields) => (fields.command = " bunx ")),
      { ...written, command: "bunx" },
    );
    expectWritten(
      saved((fields) => (fields.cwd = " /srv/other ")),
      { ...written, cwd: "/srv/other" },
    );
    const withoutCwd: Record<string, unknown> = { ...written };
    delete withoutCwd.cwd;
    expectWritten(saved((fields) => (fields.cwd = "  ")), withoutCwd);
  });

  it("drops the blank argument rows the form added and keeps the file's empty arguments", () => {
    expectWritten(saved((fields) => fields.args.push(addedRow())), written);
    expectWritten(
      saved((fields) => fields.args.push(addedRow(), ...typed("--verbose"), addedRow())),
      { ...written, args: ["--prefix", "", "server-files", "--verbose"] },
    );
    expectWritten(
      saved((fields) => fields.args.splice(2, 1)),
      { ...written, args: ["--prefix", ""] },
    );
  });

  it("keeps an argument the user emptied, as a blank item is an argument too", () => {
    expectWritten(
      saved((fields) => {
        const last = fields.args[2];
        if (last) last.value = "";
      }),
      { ...written, args: ["--prefix", "", ""] },
    );
  });

  it("keeps the file's other arguments as written when one changes, numbers included", () => {
    const server = { entry: { command: "srv", args: ["--port", 8080, " spaced "] }, transport: "stdio" as const };
    expectWritten(
      saved((fields) => {
        const first = fields.args[0];
        if (first) first.value = "--listen";
      }, server),
      { command: "srv", args: ["--listen", 8080, " spaced "] },
    );
  });

  it("keeps roots declared with none offered, even after a blank root row was added", () => {
    expectWritten(saved((fields) => fields.roots.push(addedRow())), written);
    expectWritten(
      saved((fields) => fields.roots.push(...typed(" ~/code "))),
      { ...written, roots: ["~/code"] },
    );
  });

  it("leaves out the fields the entry lacked when the user did not fill them", () => {
    const server = { entry: { command: "uvx", note: "mine" }, transport: "stdio" as const };
    expectWritten(saved(() => {}, server), server.entry);
    expectWritten(saved((fields) => fields.args.push(addedRow()), server), server.entry);
  });

  it("keeps an HTTP entry's type, or its lack of one, and the headers the user did not change", () => {
    const server = {
      entry: { url: " https://h.example/mcp ", headers: { Authorization: "Bearer ${T}", "X-Id": 7 }, timeout: 5 },
      transport: "http" as const,
    };
    expectWritten(
      saved((fields) => fields.headers.push({ key: "X-Trace", value: "on" }), server),
      { ...server.entry, headers: { ...server.entry.headers, "X-Trace": "on" } },
    );
    const sse = { entry: { type: "sse", url: "https://h.example/sse", roots: [] }, transport: "http" as const };
    expectWritten(saved(() => {}, sse), sse.entry);
  });

  it("drops the type when an HTTP server becomes a stdio one", () => {
    const server = { entry: { type: "sse", url: "https://h.example/sse", note: 1 }, transport: "http" as const };
    const entry = saved((fields) => {
      fields.transport = "stdio";
      fields.command = "srv";
    }, server);
    expectWritten(entry, { note: 1, command: "srv" });
  });
});
