import { describe, expect, it } from "vitest";
import { entryFromFields, fieldsProblem } from "../components/McpEntry";
import { CATALOG, catalogName, inFile, presetOf } from "./serverCatalog";
import type { McpFileServer } from "./types";

function fileServer(name: string, entry: Record<string, unknown>): McpFileServer {
  return { name, disabled: false, entry, transport: "command" in entry ? "stdio" : "http", problem: null };
}

describe("the server catalog", () => {
  it("makes a valid entry of every server, each under its own name and marker", () => {
    for (const server of CATALOG) {
      expect(fieldsProblem(server.fields), server.name).toBeNull();
    }
    expect(new Set(CATALOG.map((s) => s.name)).size).toBe(CATALOG.length);
    expect(new Set(CATALOG.map((s) => s.marker)).size).toBe(CATALOG.length);
    const entries = Object.fromEntries(CATALOG.map((s) => [s.name, entryFromFields(undefined, presetOf(s, []).fields)]));
    expect(entries.filesystem).toEqual({
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", "~/Documents"],
    });
    expect(entries.fetch).toEqual({ command: "uvx", args: ["mcp-server-fetch"] });
    expect(entries.git).toEqual({ command: "uvx", args: ["mcp-server-git", "--repository", "/path/to/repository"] });
    expect(entries.github).toEqual({
      type: "http",
      url: "https://api.githubcopilot.com/mcp/",
      headers: { Authorization: "Bearer ${GITHUB_PERSONAL_ACCESS_TOKEN}" },
    });
    expect(entries.context7).toEqual({ type: "http", url: "https://mcp.context7.com/mcp" });
  });

  it("gives the form a copy: a change there leaves the catalog as it was", () => {
    const [filesystem] = CATALOG;
    if (!filesystem) throw new Error("the catalog is empty");
    const fields = presetOf(filesystem, []).fields;
    fields.args[2] = { value: "~/Projects", fromFile: null };
    expect(filesystem.fields.args[2]?.value).toBe("~/Documents");
  });

  it("names a second copy after the first free number", () => {
    expect(catalogName({ name: "memory" }, ["time"])).toBe("memory");
    expect(catalogName({ name: "memory" }, ["memory", "memory-2"])).toBe("memory-3");
    const [filesystem] = CATALOG;
    if (!filesystem) throw new Error("the catalog is empty");
    expect(presetOf(filesystem, [fileServer("filesystem", { command: "x" })]).name).toBe("filesystem-2");
  });

  it("marks every server of the catalog once the file has it as the catalog writes it", () => {
    for (const server of CATALOG) {
      const saved = fileServer(server.name, entryFromFields(undefined, presetOf(server, []).fields));
      expect(inFile(server, []), server.name).toBe(false);
      expect(inFile(server, [saved]), server.name).toBe(true);
    }
  });

  it("tells a server the file runs already, by its package (any version) or its URL", () => {
    const servers = [
      fileServer("files", { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem@2025.8.21", "/data"] }),
      fileServer("docs", { url: "https://mcp.context7.com/mcp" }),
      fileServer("odd", { command: "node", args: [42, null] }),
    ];
    const byName = (name: string) => {
      const server = CATALOG.find((s) => s.name === name);
      if (!server) throw new Error(name);
      return server;
    };
    expect(inFile(byName("filesystem"), servers)).toBe(true);
    expect(inFile(byName("context7"), servers)).toBe(true);
    expect(inFile(byName("memory"), servers)).toBe(false);
    expect(inFile(byName("github"), servers)).toBe(false);
    // A package whose name only starts the same is another package.
    expect(inFile(byName("git"), [fileServer("g", { command: "uvx", args: ["mcp-server-gitlab"] })])).toBe(false);
    // Versions either way, the package as the command, an address without its slash.
    expect(inFile(byName("fetch"), [fileServer("f", { command: "uvx", args: ["mcp-server-fetch==2025.4.7"] })])).toBe(true);
    expect(inFile(byName("time"), [fileServer("t", { command: "mcp-server-time" })])).toBe(true);
    expect(inFile(byName("github"), [fileServer("gh", { url: "https://api.githubcopilot.com/mcp" })])).toBe(true);
  });
});
