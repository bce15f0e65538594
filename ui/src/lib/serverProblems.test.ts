import { describe, expect, it } from "vitest";
import { serverProblems } from "./serverProblems";
import type { McpOverview } from "./types";

describe("serverProblems", () => {
  it("names the failed, restarting and sign-in servers with their reasons, and no others", () => {
    const mcp: McpOverview = {
      configError: null,
      servers: [
        { name: "fs", state: "ready", tool_count: 2, details: { name: null, version: null, protocolVersion: "2025-06-18", instructions: null, tools: true, resources: false, prompts: false, completions: false } },
        { name: "github", state: "failed", reason: "it exited (exit status: 1)", stderr_tail: [] },
        { name: "sh", state: "restarting", attempt: 2, reason: "the connection closed", stderr_tail: [] },
        { name: "new", state: "starting" },
        { name: "off", state: "disabled" },
        { name: "tracker", state: "sign_in_required", reason: "it needs you to sign in", more_scope: false },
      ],
    };
    expect(serverProblems(mcp)).toEqual([
      { name: "github", kind: "failed", reason: "it exited (exit status: 1)" },
      { name: "sh", kind: "restarting", reason: "the connection closed" },
      { name: "tracker", kind: "sign_in", reason: "it needs you to sign in" },
    ]);
  });

  it("has none before the servers are known", () => {
    expect(serverProblems(null)).toEqual([]);
  });
});
