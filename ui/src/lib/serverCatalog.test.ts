import { describe, expect, it } from "vitest";
import { entryFromFields, fieldsProblem } from "../components/McpEntry";
import { CATALOG, catalogFields, catalogName, inFile } from "./serverCatalog";
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
    const entries = Object.fromEntries(CATALOG.map((s) => [s.name, entryFromFields(undefined, catalogFields(s))]));
    expect(entries.filesystem).toEqual({
      command: "npx",
      args: ["-y", "@modelcontextprotocol/server-filesystem", "~/Documents"],
    });
    expect(entries.fetch).toEqual({ command: "uvx", args: ["mcp-server-fetch"] });
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
    const fields = catalogFields(filesystem);
    fields.args[2] = { value: "~/Projects", fromFile: null };
    expect(filesystem.fields.args[2]?.value).toBe("~/Documents");
  });

  it("names a second copy after the first free number", () => {
    expect(catalogName({ name: "memory" }, ["time"])).toBe("memory");
    expect(catalogName({ name: "memory" }, ["memory", "memory-2"])).toBe("memory-3");
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
  });
});
