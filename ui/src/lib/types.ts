// Types of the data the backend sends; they mirror conduit-host's serialised structs.

/** Where Conduit keeps its files (conduit_host::Paths). */
export interface Paths {
  dataDir: string;
  configDir: string;
  settingsFile: string;
  mcpConfigFile: string;
  logDir: string;
  logFile: string;
}

/** The app's version and paths (conduit_host::AppInfo). */
export interface AppInfo {
  version: string;
  paths: Paths;
}

/** A stored file by content hash (conduit_core::content::MediaRef). */
export interface MediaRef {
  hash: string;
  mime: string;
  bytes: number;
  width?: number;
  height?: number;
}

/** The real server and tool behind an exposed tool name, as the host knows them. */
export interface ToolOrigin {
  server: string;
  tool: string;
}

export interface ToolCall {
  /** Conduit's own id, unique in the conversation: every state is keyed by it. */
  id: string;
  /** The provider's id, for the wire only (absent in conversations saved before it). */
  wire_id?: string;
  name: string;
  origin?: ToolOrigin;
  arguments: unknown;
  signature?: string;
  invalid_arguments?: string;
}

export type ResultPart =
  | { type: "text"; text: string }
  | { type: "image"; media: MediaRef }
  | { type: "audio"; media: MediaRef }
  | { type: "resource_link"; uri: string; name?: string; mime?: string; description?: string }
  | { type: "resource"; uri: string; mime?: string; text?: string; media?: MediaRef }
  | { type: "structured"; value: unknown }
  | { type: "long_text"; preview: string; media: MediaRef };

export interface ToolResult {
  call_id: string;
  wire_id?: string;
  name: string;
  is_error: boolean;
  parts: ResultPart[];
}

export type Block =
  | { type: "text"; text: string }
  | { type: "image"; media: MediaRef }
  | { type: "reasoning"; text: string }
  | ({ type: "tool_call" } & ToolCall)
  | ({ type: "tool_result" } & ToolResult);

export type Role = "user" | "assistant" | "tool";
export type MessageStatus = "complete" | "streaming" | "interrupted" | "error";

export interface StoredMessage {
  id: number;
  role: Role;
  status: MessageStatus;
  blocks: Block[];
  error: string | null;
  createdAt: number;
}

export interface Conversation {
  id: string;
  title: string;
  provider: string | null;
  model: string | null;
  createdAt: number;
  updatedAt: number;
  messageCount: number;
}

/** A search hit; the match in `snippet` is between `[` and `]`. */
export interface SearchHit {
  conversationId: string;
  title: string;
  messageId: number;
  snippet: string;
  createdAt: number;
}

export interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export interface Progress {
  progress: number;
  total?: number;
  message?: string;
}

export interface ProviderError {
  kind: string;
  status?: number;
  message: string;
  retry_after?: number;
}

/** The agent loop's events (conduit_core::agent::AgentEvent). */
export type AgentEvent =
  | { type: "turn_started"; turn: number }
  | { type: "text_delta"; text: string }
  | { type: "reasoning_delta"; text: string }
  | { type: "tool_call_started"; id: string; name: string; origin?: ToolOrigin | null }
  | { type: "tool_call_delta"; id: string; arguments: string }
  | { type: "block_done"; index: number; block: Block }
  | { type: "tool_call_ready"; call: ToolCall }
  | {
      type: "approval_requested";
      call: ToolCall;
      origin?: ToolOrigin | null;
      title?: string | null;
      annotations: ToolAnnotations;
      /** Why an earlier "Always allow" no longer holds. */
      changes?: string[];
    }
  | { type: "tool_call_denied"; id: string; reason: string }
  | { type: "tool_progress"; id: string; progress: Progress }
  | { type: "tool_result"; result: ToolResult; duration_ms: number }
  | { type: "usage"; usage: unknown }
  | { type: "retrying"; attempt: number; delay_ms: number; error: ProviderError }
  | { type: "message_done"; message: { role: Role; blocks: Block[] } }
  | { type: "turn_limit_reached"; limit: number }
  | { type: "cancelled" }
  | { type: "finished"; reason: unknown };

export interface TurnError {
  message: string;
  action?: "settings";
}

/** What the window hears about a turn (conduit_host::app::TurnEvent). */
export type TurnEvent =
  | { type: "agent"; event: AgentEvent }
  | { type: "ended"; status: "complete" | "interrupted" | "error"; error?: TurnError };

export interface Started {
  conversation: string;
  turn: string;
}

export interface ProviderSummary {
  id: string;
  protocol: string;
  baseUrl: string;
  defaultModel?: string;
  headers?: Record<string, string>;
  /** Where the key is ("stored in ...", "env VAR" or "none"); never the key. */
  key: string;
}

export interface LocalProvider {
  id: string;
  name: string;
  protocol: string;
  baseUrl: string;
  models: string[];
}

export type ServerState =
  | { state: "starting" }
  | { state: "ready"; details: { name?: string; version?: string }; tool_count: number }
  | { state: "failed"; reason: string; exit_code?: number; stderr_tail: string[] }
  | { state: "restarting"; attempt: number; reason: string; stderr_tail: string[] }
  | { state: "disabled" };

export type ServerStatus = { name: string } & ServerState;

export interface McpOverview {
  servers: ServerStatus[];
  configError: string | null;
}

export type Decision = "allow_once" | "always_allow" | "deny";

/** The models a user can pick, grouped by provider. */
export interface ModelGroup {
  provider: string;
  models: string[];
}

export interface ModelChoice {
  provider: string;
  model: string;
}

/** A provider as the settings form sends it; `apiKey` null keeps the stored key. */
export interface ProviderInput {
  id: string;
  protocol: string;
  baseUrl: string;
  defaultModel: string | null;
  headers: Record<string, string>;
  apiKey: string | null;
  /** From the Add form: refused if the id exists (no silent overwrite). */
  isNew: boolean;
}

/** A problem with the mcpServers text; line and column for JSON syntax errors. */
export interface TextProblem {
  message: string;
  line: number | null;
  column: number | null;
}

export interface McpFileServer {
  name: string;
  disabled: boolean;
  /** The entry as written (command/args/env/cwd or type/url/headers, plus unknown fields). */
  entry: Record<string, unknown>;
  /** The transport the entry names, as the host reads every app's `type` spelling; null when it names none. */
  transport: "stdio" | "http" | null;
  problem: string | null;
}

/** The mcpServers file (conduit_host::mcp::McpFile). */
export interface McpFile {
  path: string;
  text: string;
  /** The version a change must be based on (null: there is no file yet). */
  version: string | null;
  servers: McpFileServer[];
  problem: TextProblem | null;
}

export type McpEdit =
  | { kind: "add"; name: string; entry: Record<string, unknown> }
  | { kind: "update"; name: string; entry: Record<string, unknown> }
  | { kind: "remove"; name: string }
  | { kind: "set_disabled"; name: string; disabled: boolean }
  | { kind: "replace"; text: string };

/** Another app's config file at a place Conduit knows. */
export interface ImportFile {
  id: string;
  app: string;
  path: string;
  exists: boolean;
}

/** A file to import from: a known one by id, or the one the user picked natively. */
export type ImportSource = { kind: "known"; id: string } | { kind: "picked" };

export interface ImportCandidate {
  name: string;
  entry: Record<string, unknown>;
  problem: string | null;
}

export type ToolPolicy = "ask" | "allow" | "deny";

export interface ToolSetting {
  name: string;
  title: string | null;
  description: string | null;
  readOnly: boolean;
  destructive: boolean;
  enabled: boolean;
  policy: ToolPolicy;
  /** Why an "allow" no longer holds (the server or tool changed, or the tool is new). */
  reapproval?: string[];
}

/** A server's approval policy and its tools (conduit_host::app::ServerTools). */
export interface ServerTools {
  policy: ToolPolicy;
  tools: ToolSetting[];
}
