// Turning an mcpServers entry into the server form's fields and back, keeping what the form
// does not manage (timeouts, `disabled`, fields of other apps) exactly as written. Which
// transport an entry names is the host's answer (it owns the `type` alias table).

import type { McpFileServer } from "../lib/types";

export interface Pair {
  key: string;
  value: string;
}

export type Transport = "stdio" | "http";

export interface ServerFields {
  transport: Transport;
  command: string;
  args: string[];
  env: Pair[];
  cwd: string;
  url: string;
  headers: Pair[];
  /** Folders offered to the server as roots (absolute or `~/`); none: roots not offered. */
  roots: string[];
}

/** The fields the form owns; every other field of an entry is carried over untouched. */
const MANAGED = ["command", "args", "env", "cwd", "type", "url", "headers", "roots"];

function text(value: unknown): string {
  if (value === undefined || value === null) return "";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function pairs(value: unknown): Pair[] {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return [];
  return Object.entries(value).map(([key, v]) => ({ key, value: text(v) }));
}

export function emptyFields(): ServerFields {
  return { transport: "stdio", command: "", args: [], env: [], cwd: "", url: "", headers: [], roots: [] };
}

/** The form's fields for a server of the file; an entry that names no transport opens as stdio. */
export function fieldsFromEntry(server: Pick<McpFileServer, "entry" | "transport">): ServerFields {
  const entry = server.entry;
  return {
    transport: server.transport ?? "stdio",
    command: text(entry.command),
    args: Array.isArray(entry.args) ? entry.args.map(text) : [],
    env: pairs(entry.env),
    cwd: text(entry.cwd),
    url: text(entry.url),
    headers: pairs(entry.headers),
    roots: Array.isArray(entry.roots) ? entry.roots.map(text) : [],
  };
}

/** The first thing that keeps the fields from making an entry, or null. */
export function fieldsProblem(fields: ServerFields): string | null {
  if (fields.transport === "stdio" && fields.command.trim() === "") return "Enter the command that starts the server.";
  if (fields.transport === "http" && fields.url.trim() === "") return "Enter the server's URL.";
  const [list, what] = fields.transport === "stdio" ? [fields.env, "variable"] : [fields.headers, "header"];
  for (const root of fields.roots) {
    const folder = root.trim();
    if (folder !== "" && !folder.startsWith("/") && folder !== "~" && !folder.startsWith("~/")) {
      return `The root ${folder} must be an absolute folder or start with ~/.`;
    }
  }
  const seen = new Set<string>();
  for (const [index, pair] of list.entries()) {
    const key = pair.key.trim();
    if (key === "" && pair.value !== "") return `The ${what} in row ${index + 1} needs a name.`;
    if (key !== "" && seen.has(key)) return `The ${what} ${key} is there twice.`;
    seen.add(key);
  }
  return null;
}

/**
 * The pairs as an object. Names come from the file (perhaps another app's): Object.fromEntries
 * makes each an own property, where assigning `constructor` or `__proto__` to a plain object
 * would reach Object.prototype (and throw, as tauri.conf.json's freezePrototype freezes it).
 */
function record(list: Pair[]): Record<string, string> {
  return Object.fromEntries(
    list.filter((pair) => pair.key.trim() !== "").map((pair) => [pair.key.trim(), pair.value]),
  );
}

/**
 * The entry to save: `base`'s fields in their order with the managed ones replaced (or
 * dropped), then the managed ones `base` lacked. `base` is the server as the host listed
 * it (`undefined` for a new one).
 */
export function entryFromFields(
  base: Pick<McpFileServer, "entry" | "transport"> | undefined,
  fields: ServerFields,
): Record<string, unknown> {
  const written = base?.entry ?? {};
  const managed = new Map<string, unknown>();
  if (fields.transport === "stdio") {
    managed.set("command", fields.command.trim());
    managed.set("args", fields.args.filter((arg) => arg !== ""));
    const env = record(fields.env);
    if (Object.keys(env).length > 0) managed.set("env", env);
    if (fields.cwd.trim() !== "") managed.set("cwd", fields.cwd.trim());
  } else {
    // Another app's spelling of the HTTP transport stays; the host reads them all.
    managed.set("type", base?.transport === "http" && typeof written.type === "string" ? written.type : "http");
    managed.set("url", fields.url.trim());
    const headers = record(fields.headers);
    if (Object.keys(headers).length > 0) managed.set("headers", headers);
  }
  // Roots are offered over either transport; an empty list leaves them out.
  const roots = fields.roots.map((root) => root.trim()).filter((root) => root !== "");
  if (roots.length > 0) managed.set("roots", roots);
  // A Map, then own properties (as in `record`): the written entry's keys are the file's.
  const entry = new Map<string, unknown>();
  for (const [key, value] of Object.entries(written)) {
    if (!MANAGED.includes(key)) entry.set(key, value);
    else if (managed.has(key)) entry.set(key, managed.get(key));
  }
  for (const [key, value] of managed) if (!entry.has(key)) entry.set(key, value);
  return Object.fromEntries(entry);
}

/** "Line L, column C: message" when the problem has a place, else the message. */
export function problemText(problem: { message: string; line: number | null; column: number | null }): string {
  return problem.line !== null && problem.column !== null
    ? `Line ${problem.line}, column ${problem.column}: ${problem.message}`
    : problem.message;
}
