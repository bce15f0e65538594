// Well-known MCP servers Settings offers to add in one step. Each only fills in the server
// form: the user reads it, changes what it asks for, and saves it like any entry they typed
// (the host checks the save, and every tool is asked about before it first runs).

import { emptyFields, type ServerFields } from "../components/McpEntry";
import type { McpFileServer } from "./types";

export interface CatalogServer {
  /** The entry's name in the file (made unique against the file's names). */
  name: string;
  title: string;
  /** What it lets the model do. */
  summary: string;
  /** What must be on this computer to run it; null for a remote server. */
  needs: string | null;
  /** What to fill in or change before saving; null when it runs as it is. */
  fillIn: string | null;
  /** An argument that must be changed before the form saves (it names nothing real). */
  placeholder?: string;
  /** What tells that the file has it already: its package, or its URL. */
  marker: string;
  fields: ServerFields;
}

function stdio(command: string, args: string[]): ServerFields {
  return { ...emptyFields(), command, args: args.map((value) => ({ value, fromFile: null })) };
}

function http(url: string, headers: Record<string, string> = {}): ServerFields {
  return {
    ...emptyFields(),
    transport: "http",
    url,
    headers: Object.entries(headers).map(([key, value]) => ({ key, value })),
  };
}

const NODE = "Node.js (npx)";
const UV = "uv (uvx)";

/** The catalog, in the order Settings lists it. */
export const CATALOG: readonly CatalogServer[] = [
  {
    name: "filesystem",
    title: "Filesystem",
    summary: "Reads, writes, searches and moves files in the folders you give it.",
    needs: NODE,
    fillIn: "Change ~/Documents to the folders it may use: one argument each.",
    marker: "@modelcontextprotocol/server-filesystem",
    fields: stdio("npx", ["-y", "@modelcontextprotocol/server-filesystem", "~/Documents"]),
  },
  {
    name: "fetch",
    title: "Fetch",
    summary: "Fetches web pages and gives them to the model as Markdown.",
    needs: UV,
    fillIn: null,
    marker: "mcp-server-fetch",
    fields: stdio("uvx", ["mcp-server-fetch"]),
  },
  {
    name: "git",
    title: "Git",
    summary: "Reads and changes Git repositories: status, diffs, log, branches and commits.",
    needs: UV,
    fillIn: "Change /path/to/repository to the full path of the repository it may use (without it, it may use any repository on this computer).",
    marker: "mcp-server-git",
    placeholder: "/path/to/repository",
    fields: stdio("uvx", ["mcp-server-git", "--repository", "/path/to/repository"]),
  },
  {
    name: "memory",
    title: "Memory",
    summary: "A knowledge graph of people, things and facts the model keeps across conversations.",
    needs: NODE,
    fillIn:
      "It keeps the graph in npx's copy of the package, which an update replaces: add the variable MEMORY_FILE_PATH with a file's full path to keep it there.",
    marker: "@modelcontextprotocol/server-memory",
    fields: stdio("npx", ["-y", "@modelcontextprotocol/server-memory"]),
  },
  {
    name: "sequential-thinking",
    title: "Sequential thinking",
    summary: "A tool for thinking a problem through step by step, revising and branching.",
    needs: NODE,
    fillIn: null,
    marker: "@modelcontextprotocol/server-sequential-thinking",
    fields: stdio("npx", ["-y", "@modelcontextprotocol/server-sequential-thinking"]),
  },
  {
    name: "time",
    title: "Time",
    summary: "The current time anywhere, and conversions between time zones.",
    needs: UV,
    fillIn: null,
    marker: "mcp-server-time",
    fields: stdio("uvx", ["mcp-server-time"]),
  },
  {
    name: "playwright",
    title: "Playwright browser",
    summary: "Drives a web browser: opens pages, clicks, types, fills forms and reads what is shown.",
    needs: `${NODE} and a browser Playwright can start`,
    fillIn: null,
    marker: "@playwright/mcp",
    fields: stdio("npx", ["-y", "@playwright/mcp@latest"]),
  },
  {
    name: "github",
    title: "GitHub",
    summary: "GitHub's own remote server: repositories, issues, pull requests and code search.",
    needs: null,
    fillIn:
      "Make a GitHub personal access token, then change the Authorization header's value to Bearer and the token (Show reveals the value), or set GITHUB_PERSONAL_ACCESS_TOKEN in the environment Conduit starts in.",
    marker: "https://api.githubcopilot.com/mcp/",
    fields: http("https://api.githubcopilot.com/mcp/", { Authorization: "Bearer ${GITHUB_PERSONAL_ACCESS_TOKEN}" }),
  },
  {
    name: "context7",
    title: "Context7",
    summary: "Up-to-date documentation and code examples of libraries, looked up by name.",
    needs: null,
    fillIn: null,
    marker: "https://mcp.context7.com/mcp",
    fields: http("https://mcp.context7.com/mcp"),
  },
];

/** `server`'s name, or, when the file has a server of that name, the first free `name-2`, `name-3`... */
export function catalogName(server: Pick<CatalogServer, "name">, taken: readonly string[]): string {
  if (!taken.includes(server.name)) return server.name;
  for (let n = 2; ; n++) {
    const name = `${server.name}-${n}`;
    if (!taken.includes(name)) return name;
  }
}

/** A URL without its trailing slashes, as two spellings of one address compare. */
function address(url: string): string {
  return url.trim().replace(/\/+$/, "");
}

/** Whether an entry of the file runs `server` already: it names its package (any version:
 *  `PKG@1.2`, `PKG==1.2`, as an argument or the command), or its URL. */
export function inFile(server: Pick<CatalogServer, "marker">, servers: readonly McpFileServer[]): boolean {
  const { marker } = server;
  const names = (word: unknown): boolean =>
    typeof word === "string" && (word === marker || word.startsWith(`${marker}@`) || word.startsWith(`${marker}==`));
  return servers.some((entry) => {
    const { command, args, url } = entry.entry as { command?: unknown; args?: unknown; url?: unknown };
    if (typeof url === "string") return address(url) === address(marker);
    return names(command) || (Array.isArray(args) && args.some(names));
  });
}

/** The server form filled in from the catalog. */
export interface ServerPreset {
  name: string;
  title: string;
  fields: ServerFields;
  fillIn: string | null;
  placeholder: string | null;
}

/** Why the form cannot save `fields` as they are: an argument still the preset's
 *  placeholder; null when nothing keeps it. */
export function presetProblem(preset: ServerPreset, fields: ServerFields): string | null {
  const { placeholder } = preset;
  if (placeholder === null || !fields.args.some((row) => row.value.trim() === placeholder)) return null;
  return preset.fillIn ?? `Change ${placeholder}.`;
}

/** `server` as the form opens it: under a name the file's `servers` do not have yet, its
 *  fields a copy the form may change. */
export function presetOf(server: CatalogServer, servers: readonly McpFileServer[]): ServerPreset {
  return {
    name: catalogName(server, servers.map((s) => s.name)),
    title: server.title,
    fields: structuredClone(server.fields),
    fillIn: server.fillIn,
    placeholder: server.placeholder ?? null,
  };
}
