// Turning an mcpServers entry into the server form's fields and back, keeping what the form
// does not manage (timeouts, `disabled`, fields of other apps) exactly as written. Which
// transport an entry names is the host's answer (it owns the `type` alias table).

import type { McpFileServer } from "../lib/types";

export interface Pair {
  key: string;
  value: string;
}

export type Transport = "stdio" | "http";

/**
 * One row of the arguments or roots list. The row remembers the file's item it shows, so a
 * save can tell a blank row the form added (dropped) from a blank item the file has (kept),
 * and write an item the user left alone exactly as written.
 */
export interface ListRow {
  value: string;
  /** The file's item the row was filled from, as written; null for a row the form added. */
  fromFile: { written: unknown } | null;
}

export interface ServerFields {
  transport: Transport;
  command: string;
  args: ListRow[];
  env: Pair[];
  cwd: string;
  url: string;
  headers: Pair[];
  /** Folders offered to the server as roots (absolute or `~/`); none: roots not offered. */
  roots: ListRow[];
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

function rows(value: unknown): ListRow[] {
  return Array.isArray(value) ? value.map((item: unknown) => ({ value: text(item), fromFile: { written: item } })) : [];
}

/** The row "Add argument" and "Add root" append. */
export function addedRow(): ListRow {
  return { value: "", fromFile: null };
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
    args: rows(entry.args),
    env: pairs(entry.env),
    cwd: text(entry.cwd),
    url: text(entry.url),
    headers: pairs(entry.headers),
    roots: rows(entry.roots),
  };
}

/** The first thing that keeps the fields from making an entry, or null. */
export function fieldsProblem(fields: ServerFields): string | null {
  if (fields.transport === "stdio" && fields.command.trim() === "") return "Enter the command that starts the server.";
  if (fields.transport === "http" && fields.url.trim() === "") return "Enter the server's URL.";
  const [list, what] = fields.transport === "stdio" ? [fields.env, "variable"] : [fields.headers, "header"];
  for (const root of fields.roots) {
    const folder = root.value.trim();
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

function ownField(object: unknown, key: string): { value: unknown } | null {
  if (typeof object !== "object" || object === null || Array.isArray(object) || !Object.hasOwn(object, key)) return null;
  return { value: (object as Record<string, unknown>)[key] };
}

/** Whether a row still shows the file's item as it was filled in. */
function untouched(row: ListRow): row is ListRow & { fromFile: { written: unknown } } {
  return row.fromFile !== null && row.value === text(row.fromFile.written);
}

/** Blank rows the form added say nothing; every row from the file does, blank or not. */
function meaningfulArgs(list: ListRow[]): ListRow[] {
  return list.filter((row) => row.fromFile !== null || row.value !== "");
}

/** A root the user typed is trimmed and, blank, dropped; one left as the file has it stays. */
function meaningfulRoots(list: ListRow[]): ListRow[] {
  return list.filter((row) => untouched(row) || row.value.trim() !== "");
}

function sameValues(list: ListRow[], opened: ListRow[]): boolean {
  return list.length === opened.length && list.every((row, index) => row.value === opened[index]?.value);
}

/** Pairs with a name (a nameless one is a blank row, see fieldsProblem), as name and value. */
function namedPairs(list: Pair[]): string[][] {
  return list.filter((pair) => pair.key.trim() !== "").map((pair) => [pair.key, pair.value]);
}

function samePairs(list: Pair[], opened: Pair[]): boolean {
  return JSON.stringify(namedPairs(list)) === JSON.stringify(namedPairs(opened));
}

/**
 * The pairs as an object; a pair still as `written` has it keeps its name and value as
 * written. Names come from the file (perhaps another app's): Object.fromEntries makes each an
 * own property, where assigning `constructor` or `__proto__` to a plain object would reach
 * Object.prototype (and throw, as tauri.conf.json's freezePrototype freezes it).
 */
function record(list: Pair[], written: unknown): Record<string, unknown> {
  return Object.fromEntries(
    list.flatMap((pair): [string, unknown][] => {
      const asWritten = ownField(written, pair.key);
      if (asWritten !== null && text(asWritten.value) === pair.value) return [[pair.key, asWritten.value]];
      return pair.key.trim() === "" ? [] : [[pair.key.trim(), pair.value]];
    }),
  );
}

/**
 * The entry to save: `base`'s fields in their order with the managed ones replaced (or
 * dropped), then the managed ones `base` lacked. `base` is the server as the host listed
 * it (`undefined` for a new one). A field whose form value is still the one `base` fills in
 * is written exactly as `base` has it (absent stays absent): saving after changing one field
 * changes only that field. A field the user changed is written from the form, trimmed.
 */
export function entryFromFields(
  base: Pick<McpFileServer, "entry" | "transport"> | undefined,
  fields: ServerFields,
): Record<string, unknown> {
  const written = base?.entry ?? {};
  const opened = base ? fieldsFromEntry(base) : emptyFields();
  const managed = new Map<string, unknown>();
  const keepAsWritten = (key: string): void => {
    const field = ownField(written, key);
    if (field !== null) managed.set(key, field.value);
  };
  if (base !== undefined && fields.transport === base.transport) {
    // The same transport: `type` stays as written, in any app's spelling ("sse", "stdio") or
    // left out; the host reads them all.
    keepAsWritten("type");
  } else if (fields.transport === "http") {
    managed.set("type", "http");
  }
  if (fields.transport === "stdio") {
    if (fields.command === opened.command) keepAsWritten("command");
    else managed.set("command", fields.command.trim());
    const args = meaningfulArgs(fields.args);
    if (sameValues(args, opened.args)) keepAsWritten("args");
    else managed.set("args", args.map((row) => (untouched(row) ? row.fromFile.written : row.value)));
    if (samePairs(fields.env, opened.env)) keepAsWritten("env");
    else {
      const env = record(fields.env, written.env);
      if (Object.keys(env).length > 0) managed.set("env", env);
    }
    if (fields.cwd === opened.cwd) keepAsWritten("cwd");
    else if (fields.cwd.trim() !== "") managed.set("cwd", fields.cwd.trim());
  } else {
    if (fields.url === opened.url) keepAsWritten("url");
    else managed.set("url", fields.url.trim());
    if (samePairs(fields.headers, opened.headers)) keepAsWritten("headers");
    else {
      const headers = record(fields.headers, written.headers);
      if (Object.keys(headers).length > 0) managed.set("headers", headers);
    }
  }
  // Roots are offered over either transport. Left as they were, they stay as written: an
  // empty list declares roots and offers none, unlike no list. Emptied here, they go.
  const roots = meaningfulRoots(fields.roots);
  if (sameValues(roots, opened.roots)) keepAsWritten("roots");
  else if (roots.length > 0) managed.set("roots", roots.map((row) => (untouched(row) ? row.fromFile.written : row.value.trim())));
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
