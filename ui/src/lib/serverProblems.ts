// Which MCP servers the chat window warns about: those whose tools are gone for now.
import type { McpOverview } from "./types";

export interface ServerProblem {
  name: string;
  /** Failed for good (its log is in Settings), restarting (its tools come back), or
   * waiting for the user to sign in (in Settings). */
  kind: "failed" | "restarting" | "sign_in";
  reason: string;
}

export function serverProblems(mcp: McpOverview | null): ServerProblem[] {
  const problems: ServerProblem[] = [];
  for (const server of mcp?.servers ?? []) {
    if (server.state === "failed" || server.state === "restarting") {
      problems.push({ name: server.name, kind: server.state, reason: server.reason });
    } else if (server.state === "sign_in_required") {
      problems.push({ name: server.name, kind: "sign_in", reason: server.reason });
    }
  }
  return problems;
}
