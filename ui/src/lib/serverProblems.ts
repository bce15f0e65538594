// Which MCP servers the chat window warns about: those whose tools are gone for now.
import type { McpOverview } from "./types";

export interface ServerProblem {
  name: string;
  /** Failed for good (its log is in Settings), or restarting (its tools come back). */
  failed: boolean;
  reason: string;
}

export function serverProblems(mcp: McpOverview | null): ServerProblem[] {
  const problems: ServerProblem[] = [];
  for (const server of mcp?.servers ?? []) {
    if (server.state === "failed" || server.state === "restarting") {
      problems.push({ name: server.name, failed: server.state === "failed", reason: server.reason });
    }
  }
  return problems;
}
