// Generated from the Rust types by src-tauri/src/bindings_tests.rs: do not edit.
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.

/** The commands of src-tauri/commands.list. */
export type CommandName =
  | "app_info"
  | "next_window_events"
  | "list_conversations"
  | "history_damage"
  | "search_history"
  | "load_messages"
  | "rename_conversation"
  | "pin_conversation"
  | "delete_conversation"
  | "export_conversation"
  | "list_providers"
  | "provider_models"
  | "detect_local_providers"
  | "add_local_provider"
  | "send_message"
  | "stop_turn"
  | "answer_without_waiting"
  | "tool_choices"
  | "mentionables"
  | "complete_mention"
  | "set_conversation_toolset"
  | "conversation_instructions"
  | "set_conversation_instructions"
  | "conversation_allows"
  | "revoke_conversation_allow"
  | "answer_approval"
  | "mcp_questions"
  | "answer_question"
  | "mcp_sampling_requests"
  | "answer_sampling"
  | "store_attachment"
  | "mcp_servers"
  | "open_external"
  | "open_settings"
  | "save_provider"
  | "remove_provider"
  | "mcp_file"
  | "edit_mcp_file"
  | "reveal_mcp_file"
  | "check_mcp_text"
  | "mcp_import_files"
  | "pick_mcp_import_file"
  | "mcp_import_candidates"
  | "import_mcp_servers"
  | "mcp_server_tools"
  | "mcp_server_output"
  | "restart_mcp_server"
  | "mcp_sign_in"
  | "mcp_sign_out"
  | "mcp_signed_in"
  | "mcp_serve_snippets"
  | "mcp_http_status"
  | "set_mcp_http"
  | "copy_mcp_token"
  | "set_tool_enabled"
  | "set_tool_policy"
  | "set_server_policy"
  | "set_sampling_policy"
  | "open_folder"
  | "open_media"
  | "open_app_view"
  | "close_app_view"
  | "app_view_call_tool"
  | "set_app_view_context"
  | "app_view_open_link"
  | "copy_image"
  | "save_image"
  | "clipboard_image";

/** The widths the host makes thumbnails at (conduit_store::media::THUMBNAIL_WIDTHS). */
export const THUMBNAIL_WIDTHS = [256, 512, 1024, 1600, 2400] as const;

/** What a secret value reads as in what the window receives (conduit_host::providers::MASKED). */
export const MASKED = "••••••••";

/** The most UTF-8 bytes of a view's context the host keeps (conduit_host::app_views::MAX_CONTEXT). */
export const MAX_VIEW_CONTEXT = 16384;

/** The most UTF-8 bytes of a view's message to the model (conduit_host::app_views::MAX_VIEW_MESSAGE). */
export const MAX_VIEW_MESSAGE = 65536;

/** The most UTF-8 bytes of a view's tool call's arguments as JSON (conduit_host::app_views::MAX_VIEW_ARGUMENTS). */
export const MAX_VIEW_ARGUMENTS = 4194304;

export type Paths = { 
/**
 * Database, media and logs.
 */
dataDir: string, 
/**
 * Settings and the default `mcpServers` file.
 */
configDir: string, settingsFile: string, mcpConfigFile: string, 
/**
 * The history database.
 */
databaseFile: string, 
/**
 * Images and audio, stored once by content hash.
 */
mediaDir: string, logDir: string, logFile: string, };

export type AppInfo = { version: string, paths: Paths, };

export type MediaRef = { 
/**
 * Hex SHA-256 of the bytes.
 */
hash: string, 
/**
 * The type the bytes have (detected from them, not taken from a declaration).
 */
mime: string, bytes: number, width?: number | null, height?: number | null, };

export type ToolOrigin = { server: string, tool: string, };

export type ToolCall = { 
/**
 * Conduit's own id for the call, unique in the conversation: every event, result,
 * approval and window state names the call by it. (In conversations saved before
 * `wire_id` existed it is the provider's id.)
 */
id: string, 
/**
 * The provider's id for the call, which only goes back to the provider: providers
 * repeat ids (per response counters, a model repeating one), so it names nothing
 * in Conduit. `None` in conversations saved before it existed: `id` is then the
 * provider's.
 */
wire_id?: string | null, 
/**
 * The exposed name the model called.
 */
name: string, 
/**
 * The arguments as the model wrote them, parsed; `{}` when it wrote none.
 */
arguments: unknown, 
/**
 * A provider's opaque token that must be sent back with the call (Gemini's
 * `thoughtSignature`).
 */
signature?: string | null, 
/**
 * Set when the model's arguments were not valid JSON (`arguments` is then `{}`):
 * the call is answered with this error instead of running.
 */
invalid_arguments?: string | null, 
/**
 * The real server and tool behind the exposed name, as the host knows them when
 * the call is made (`None` for built-in tools and unknown names).
 */
origin?: ToolOrigin | null, };

export type ResultPart = { "type": "text", text: string, } | { "type": "image", media: MediaRef, } | { "type": "audio", media: MediaRef, } | { "type": "resource_link", uri: string, name?: string | null, mime?: string | null, description?: string | null, } | { "type": "resource", uri: string, mime?: string | null, text?: string | null, media?: MediaRef | null, } | { "type": "structured", value: unknown, } | { "type": "long_text", preview: string, media: MediaRef, } | { "type": "view", uri: string, structured?: unknown, };

export type ToolResult = { 
/**
 * The call's [`ToolCall::id`].
 */
call_id: string, 
/**
 * The call's [`ToolCall::wire_id`], which goes to the provider.
 */
wire_id?: string | null, 
/**
 * The tool's name, which some protocols (Gemini) repeat in the result.
 */
name: string, is_error: boolean, parts: Array<ResultPart>, };

export type Block = { "type": "text", text: string, } | { "type": "image", media: MediaRef, } | { "type": "file", name: string, text: string, } | { "type": "document", name: string, media: MediaRef, } | { "type": "reasoning", text: string, 
/**
 * Anthropic's thinking signature.
 */
signature?: string | null, 
/**
 * OpenAI Responses' encrypted reasoning, or Anthropic's redacted thinking data.
 */
encrypted?: string | null, 
/**
 * The provider's id for the reasoning item (OpenAI Responses).
 */
id?: string | null, 
/**
 * The protocol that produced it; replay goes only to the same protocol.
 */
protocol?: string | null, 
/**
 * The provider configuration and model that produced it (`provider/model`; see
 * [`producer`]): its signature and encrypted content are valid only there (an
 * OpenAI organisation's encrypted reasoning is refused by Azure). `None` in
 * conversations saved before it existed.
 */
producer?: string | null, } | { "type": "tool_call" } & ToolCall | { "type": "tool_result" } & ToolResult;

export type Role = "user" | "assistant" | "tool";

export type Message = { role: Role, blocks: Array<Block>, };

export type MessageStatus = "complete" | "streaming" | "interrupted" | "error" | "replaced";

export type StoredMessage = { id: number, role: Role, status: MessageStatus, blocks: Array<Block>, usage: Usage | null, error: string | null, createdAt: number, };

export type Conversation = { id: string, title: string, provider: string | null, model: string | null, createdAt: number, updatedAt: number, messageCount: number, 
/**
 * Pinned to the top of the list by the user.
 */
pinned: boolean, };

export type SearchHit = { conversationId: string, title: string, messageId: number, snippet: string, createdAt: number, };

export type HistoryDamage = { 
/**
 * What SQLite's check said, as it said it.
 */
found: string, 
/**
 * The damaged file.
 */
file: string, };

export type ToolAnnotations = { readOnlyHint?: boolean | null, destructiveHint?: boolean | null, idempotentHint?: boolean | null, openWorldHint?: boolean | null, };

export type Progress = { progress: number, total?: number | null, message?: string | null, };

export type Usage = { inputTokens: number, outputTokens: number, cacheReadTokens: number, reasoningTokens: number, };

export type StopReason = "end_turn" | "tool_use" | "max_tokens" | "refusal" | { "other": string };

export type ProviderErrorKind = "invalid_request" | "authentication" | "not_found" | "request_too_large" | "rate_limited" | "server" | "overloaded" | "connection" | "stalled" | "stream" | "protocol" | "input" | "tools_unsupported" | "context_too_long";

export type ProviderError = { kind: ProviderErrorKind, status?: number | null, message: string, 
/**
 * How long the provider asked to wait before trying again.
 */
retry_after?: number, };

export type StandingAllow = "settings" | "conversation" | "auto";

export type ContextFit = "whole" | "older_outputs_cut" | "older_outputs_left_out" | "last_message_only";

export type ReasoningEffort = "low" | "medium" | "high";

export type AgentEvent = { "type": "turn_started", turn: number, } | { "type": "text_delta", text: string, } | { "type": "reasoning_delta", text: string, } | { "type": "tool_call_started", id: string, name: string, origin?: ToolOrigin | null, } | { "type": "tool_call_delta", id: string, arguments: string, } | { "type": "block_done", index: number, block: Block, } | { "type": "tool_call_ready", call: ToolCall, } | { "type": "approval_requested", call: ToolCall, 
/**
 * The arguments exactly as the tool gets them, as indented JSON: what the window
 * shows, since the page's JSON numbers lose digits past 2^53 (an id of
 * 9007199254740993 would read as …992 on the card and go to the tool whole).
 */
arguments_text: string, origin?: ToolOrigin | null, title: string | null, annotations: ToolAnnotations, 
/**
 * What the server says the tool does, as the model was shown it: what an allow
 * is bound to, so the user reads it before allowing (above all when it changed).
 */
description?: string, changes?: Array<string>, } | { "type": "tool_call_denied", id: string, reason: string, } | { "type": "tool_call_allowed", id: string, by: StandingAllow, } | { "type": "tool_call_queued", id: string, } | { "type": "tool_call_running", id: string, } | { "type": "tool_progress", id: string, progress: Progress, } | { "type": "tool_result", result: ToolResult, duration_ms: number, } | { "type": "usage", usage: Usage, } | { "type": "retrying", attempt: number, delay_ms: number, error: ProviderError, } | { "type": "left_out", what: string, } | { "type": "message_done", message: Message, } | { "type": "context_shortened", fit: ContextFit, } | { "type": "turn_limit_reached", limit: number, } | { "type": "cancelled" } | { "type": "finished", reason: StopReason, };

export type ErrorAction = "open_settings" | "enter_client_id";

export type CommandError = { 
/**
 * The error and its causes, outermost first.
 */
message: string, 
/**
 * Where the user can fix it, when the window can take them there.
 */
action?: ErrorAction, };

export type TurnStatus = "complete" | "interrupted" | "error";

export type TurnEvent = { "type": "servers_starting", servers: Array<string>, } | { "type": "agent", 
/**
 * Boxed: an agent event is much larger than `Ended`.
 */
event: AgentEvent, } | { "type": "ended", status: TurnStatus, error?: CommandError, 
/**
 * Whether the user's message was saved: a turn refused or stopped while it was
 * made ready (a mentioned resource still being read) saved nothing, and the window
 * gives the message back. The host says so: the page cannot tell an unsaved
 * "yes" from an earlier one.
 */
saved: boolean, 
/**
 * Why a complete turn's answer is not all it could be: cut off at the model's
 * output limit, refused, or stopped at the most requests one message may make.
 */
notice?: string, };

export type Started = { conversation: string, turn: string, };

export type AttachedFile = { name: string, text: string, };

export type AttachedDocument = { hash: string, name: string, };

export type SendRequest = { 
/**
 * Continue this conversation; `None` starts a new one.
 */
conversation: string | null, text: string, 
/**
 * Hashes of images stored beforehand with [`App::store_attachment`]; their
 * references are rebuilt from the store, never taken from the window.
 */
attachments: Array<string>, 
/**
 * Text files the window read for the message (picked or dropped); the host checks
 * each ([`conduit_core::attached`]) before anything is saved.
 */
files?: Array<AttachedFile>, 
/**
 * PDFs stored beforehand with [`App::store_attachment`], by hash, with the names
 * they were picked or dropped under; checked by
 * [`conduit_core::attached::check_document`] before anything is saved.
 */
documents?: Array<AttachedDocument>, 
/**
 * A provider id from settings.
 */
provider: string, 
/**
 * `None` uses the provider's default model.
 */
model: string | null, 
/**
 * For a new conversation: the tools it may use (kept with it). A continued
 * conversation keeps its own; this is then ignored.
 */
toolset?: Toolset, 
/**
 * Servers' resources attached to the message; the host reads them.
 */
resources?: Array<ResourceMention>, 
/**
 * A server's prompt used with the message: its messages go first.
 */
prompt?: PromptMention, 
/**
 * Tokens of the views whose context (`ui/update-model-context`) goes with this
 * message; the host holds the context itself.
 */
viewContext?: Array<string>, 
/**
 * Answers the conversation's last message again with no new one (after a turn that
 * failed); nothing else may come with it.
 */
again?: boolean, 
/**
 * With `again`: the last user message is answered anew, whatever answered it before
 * ("Answer again"); that answer is kept, marked replaced.
 */
replaceAnswer?: boolean, 
/**
 * This message takes the place of the conversation's last message of the user's
 * and its answer ("Edit"), which are kept, marked replaced.
 */
replaceMessage?: boolean, 
/**
 * For a new conversation: its instructions to the model (kept with it). A continued
 * conversation keeps its own; this is then ignored.
 */
instructions?: string, 
/**
 * How much the model is asked to think ("Thinking" beside the model picker);
 * `None` leaves it at its default.
 */
reasoning?: ReasoningEffort, };

export type ProviderSummary = { 
/**
 * `secret store`, `env VAR`, or `none`.
 */
key: string, id: string, protocol: string, baseUrl: string, defaultModel?: string | null, 
/**
 * Headers sent with every request (e.g. OpenRouter's `HTTP-Referer`). Conduit keeps
 * the values of those it saves in the secret store (`stored_headers`); values here are
 * written by hand or by an earlier Conduit, and win over a stored one of the same name.
 */
headers?: { [key in string]: string }, 
/**
 * Take the key from this environment variable instead of the secret store.
 */
apiKeyEnv?: string | null, };

export type LocalProvider = { 
/**
 * A suggested provider id: `ollama` or `lm-studio`.
 */
id: string, name: string, protocol: string, baseUrl: string, models: Array<string>, };

export type ProviderInput = { id: string, protocol: string, baseUrl: string, defaultModel: string | null, 
/**
 * A value of [`MASKED`] keeps the stored value of that header.
 */
headers: { [key in string]: string }, apiKey: string | null, 
/**
 * Set by the Add form: a provider with this id must not exist yet.
 */
isNew: boolean, };

export type ServerDetails = { name: string | null, version: string | null, protocolVersion: string, instructions: string | null, tools: boolean, resources: boolean, prompts: boolean, 
/**
 * It completes prompt and resource template arguments.
 */
completions: boolean, };

export type ServerState = { "state": "starting" } | { "state": "ready", details: ServerDetails, tool_count: number, } | { "state": "failed", reason: string, exit_code?: number, stderr_tail: Array<string>, } | { "state": "restarting", attempt: number, reason: string, stderr_tail: Array<string>, } | { "state": "disabled" } | { "state": "sign_in_required", reason: string, 
/**
 * Signed in, but the server wants more access than was granted.
 */
more_scope: boolean, };

export type ServerStatus = { name: string, } & ({ "state": "starting" } | { "state": "ready", details: ServerDetails, tool_count: number, } | { "state": "failed", reason: string, exit_code?: number, stderr_tail: Array<string>, } | { "state": "restarting", attempt: number, reason: string, stderr_tail: Array<string>, } | { "state": "disabled" } | { "state": "sign_in_required", reason: string, 
/**
 * Signed in, but the server wants more access than was granted.
 */
more_scope: boolean, });

export type ServerOutput = { stderr: Array<string>, logMessages: Array<string>, };

export type McpOverview = { servers: Array<ServerStatus>, configError: string | null, };

export type Decision = "allow_once" | "allow_in_conversation" | "always_allow" | "deny";

export type ConversationAllow = { server: string, tool: string, };

export type TextProblem = { message: string, line: number | null, column: number | null, };

export type TransportKind = "stdio" | "http";

export type McpFileServer = { name: string, disabled: boolean, 
/**
 * The entry as written, unknown fields included.
 */
entry: Record<string, unknown>, 
/**
 * The transport the entry names, every app's `type` spelling read the one way
 * ([`config::TransportKind::of_entry`]); `None` when it names none.
 */
transport: TransportKind | null, 
/**
 * Why the entry cannot start, if it cannot.
 */
problem: string | null, };

export type McpFile = { path: string, 
/**
 * The file's text (a starting document when there is no file).
 */
text: string, 
/**
 * Names this version of the file; a change must name the version it is based on.
 * Keyed per process (`Host::page_fingerprint`): the bytes hold secrets the window
 * sees only masked, and a plain hash of them would let a script test its guesses.
 */
version: string | null, servers: Array<McpFileServer>, 
/**
 * Why the file cannot be read as it is (its servers are then not listed).
 */
problem: TextProblem | null, };

export type Edit = { "kind": "add", name: string, entry: Record<string, unknown>, } | { "kind": "update", name: string, entry: Record<string, unknown>, } | { "kind": "remove", name: string, } | { "kind": "set_disabled", name: string, disabled: boolean, } | { "kind": "replace", text: string, };

export type ImportFile = { exists: boolean, id: string, app: string, path: string, };

export type Folder = "data" | "logs" | "config";

export type ImportSource = { "kind": "known", id: string, } | { "kind": "picked" };

export type ImportPick = { name: string, target: string, };

export type ImportCandidate = { name: string, entry: Record<string, unknown>, problem: string | null, };

export type ToolPolicy = "ask" | "allow" | "deny";

export type ToolSetting = { enabled: boolean, policy: ToolPolicy, 
/**
 * Why an "allow" no longer holds (the server or the tool changed since, or the tool
 * is new): its calls are asked about again. Empty when nothing needs re-approval.
 */
reapproval?: Array<string>, 
/**
 * What the tool and its server were as listed, sent back with an "allow".
 */
shown: string, name: string, title: string | null, description: string | null, readOnly: boolean, destructive: boolean, 
/**
 * JSON Schema of its arguments.
 */
inputSchema: Record<string, unknown>, };

export type ServerTools = { policy: ToolPolicy, 
/**
 * What happens to the server's sampling requests.
 */
sampling: ToolPolicy, tools: Array<ToolSetting>, 
/**
 * What the server's running tools were as listed, sent back with a server-wide
 * "allow" (see [`crate::approval::shown_token`]).
 */
shown: string, };

export type ChoiceOption = { value: string, title: string | null, };

export type FieldInput = { "type": "text", default: string | null, 
/**
 * `email`, `uri`, `date` or `date-time`.
 */
format: string | null, minLength: number | null, maxLength: number | null, } | { "type": "number", integer: boolean, default: number | null, minimum: number | null, maximum: number | null, } | { "type": "boolean", default: boolean | null, } | { "type": "choice", options: Array<ChoiceOption>, default: string | null, } | { "type": "choices", options: Array<ChoiceOption>, default: Array<string>, minItems: number | null, maxItems: number | null, };

export type FormField = { name: string, title: string | null, description: string | null, required: boolean, input: FieldInput, };

export type ElicitationKind = { "mode": "form", fields: Array<FormField>, } | { "mode": "url", url: string, };

export type Elicitation = { 
/**
 * The server that asks (the name in the `mcpServers` file).
 */
server: string, message: string, kind: ElicitationKind, };

export type Question = { 
/**
 * The host's id for it (never the server's).
 */
id: string, elicitation: Elicitation, };

export type QuestionReply = { "action": "accept", values: Record<string, unknown>, } | { "action": "decline" } | { "action": "cancel" };

export type ModelPick = { 
/**
 * A saved provider's id.
 */
provider: string, 
/**
 * The model; `None` takes the provider's default model.
 */
model: string | null, };

export type SamplingRole = "user" | "assistant";

export type SamplingContent = { "type": "text", text: string, } | { "type": "image", mimeType: string, bytes: number, } | { "type": "audio", mimeType: string, bytes: number, } | { "type": "toolUse", id: string, name: string, input: Record<string, unknown>, } | { "type": "toolResult", toolUseId: string, text: string, isError: boolean, };

export type SamplingMessage = { role: SamplingRole, content: Array<SamplingContent>, };

export type SamplingTool = { name: string, description: string | null, inputSchema: Record<string, unknown>, };

export type ToolChoice = "auto" | "required" | "none";

export type SamplingRequest = { 
/**
 * The server that asks (the name in the `mcpServers` file).
 */
server: string, messages: Array<SamplingMessage>, systemPrompt: string | null, 
/**
 * Tools the model may ask for; Conduit never runs them, the server does.
 */
tools: Array<SamplingTool>, toolChoice: ToolChoice, 
/**
 * Model names or families the server prefers, in its order.
 */
modelHints: Array<string>, costPriority: number | null, speedPriority: number | null, intelligencePriority: number | null, maxTokens: number, 
/**
 * What context the server asked to include; Conduit includes none (and does not
 * declare the `context` capability).
 */
includeContext: string | null, temperature: number | null, stopSequences: Array<string>, };

export type SamplingStop = "endTurn" | "maxTokens" | "toolUse" | "stopSequence" | { "other": string };

export type SampledMessage = { 
/**
 * The model that answered, as its provider names it.
 */
model: string, content: Array<SamplingContent>, stopReason: SamplingStop, };

export type SamplingState = { "state": "asking" } | { "state": "running", pick: ModelPick, } | { "state": "review", pick: ModelPick, result: SampledMessage, } | { "state": "failed", pick: ModelPick, error: string, };

export type SamplingQuestion = { 
/**
 * The host's id for it (never the server's).
 */
id: string, request: SamplingRequest, state: SamplingState, };

export type SamplingReply = { "action": "run", pick: ModelPick, } | { "action": "send" } | { "action": "deny" };

export type ViewDomains = { 
/**
 * `fetch`, XHR and WebSocket targets.
 */
connect: Array<string>, 
/**
 * Scripts, styles, images, fonts and media.
 */
resource: Array<string>, 
/**
 * Allowed `<base href>` targets.
 */
baseUri: Array<string>, 
/**
 * The entries dropped as unsafe or malformed, to say so.
 */
dropped: Array<string>, };

export type ViewHandle = { 
/**
 * The host's token for this view (never the server's).
 */
token: string, 
/**
 * Where the sandbox proxy is: `mcp-app://<token>/`.
 */
url: string, server: string, tool: string, uri: string, 
/**
 * The inner frame's `allow` attribute (the permissions the view asked for).
 */
allow: string, prefersBorder: boolean | null, 
/**
 * The origins the view may reach beyond itself (shown to the user).
 */
domains: ViewDomains, 
/**
 * The policy its document is served with.
 */
csp: string, };

export type ViewLookup = { "state": "none" } | { "state": "unavailable", reason: string, } | { "state": "ready", view: ViewHandle, };

export type ViewCall = { tool: string, arguments: Record<string, unknown>, };

export type ViewCallResult = { result: Record<string, unknown>, };

export type ServeSnippets = { command: string, args: Array<string>, claudeDesktop: string, cursor: string, vsCode: string, };

export type ServeHttpStatus = { enabled: boolean, address: string, 
/**
 * Where clients reach it, while it serves.
 */
url: string | null, 
/**
 * Why it does not serve although it should.
 */
error: string | null, 
/**
 * The token as the window may see it: masked (copy it with the host's command).
 */
token: string, };

export type SignedOut = { "kind": "nothing_stored" } | { "kind": "revoked" } | { "kind": "forgotten" } | { "kind": "revocation_failed", "reason": string };

export type ToolKey = { server: string, tool: string, };

export type Toolset = { 
/**
 * Servers none of whose tools are offered.
 */
offServers: Array<string>, 
/**
 * Single tools not offered.
 */
offTools: Array<ToolKey>, };

export type ToolsetTool = { name: string, title: string | null, on: boolean, 
/**
 * About how many tokens its definition costs in each request.
 */
tokens: number, };

export type ToolsetServer = { name: string, on: boolean, tools: Array<ToolsetTool>, };

export type ToolChoices = { toolset: Toolset, servers: Array<ToolsetServer>, offered: number, tokens: number, 
/**
 * Why so many tools may hurt, when they may; or why the conversation's kept choice
 * could not be read (it then offers nothing until the user chooses again).
 */
warning: string | null, };

export type Format = "markdown" | "json";

export type ResourceChoice = { server: string, uri: string, name: string, title: string | null, description: string | null, mime: string | null, };

export type TemplateChoice = { server: string, uriTemplate: string, name: string, title: string | null, description: string | null, 
/**
 * The names the template asks for, in order.
 */
arguments: Array<string>, };

export type PromptArgumentChoice = { name: string, title: string | null, description: string | null, required: boolean, };

export type PromptChoice = { server: string, name: string, title: string | null, description: string | null, arguments: Array<PromptArgumentChoice>, };

export type Mentionables = { resources: Array<ResourceChoice>, templates: Array<TemplateChoice>, prompts: Array<PromptChoice>, 
/**
 * Servers whose lists failed, with why.
 */
problems: Array<string>, 
/**
 * Lists offered cut short (past Conduit's caps, or not listed in time), each saying
 * how far they go.
 */
notes: Array<string>, };

export type ResourceMention = { "kind": "resource", server: string, uri: string, } | { "kind": "template", server: string, uriTemplate: string, arguments: Record<string, string>, };

export type PromptMention = { server: string, name: string, arguments: Record<string, string>, };

export type CompletionTarget = { "kind": "template", uriTemplate: string, } | { "kind": "prompt", name: string, };

export type WindowEvent = { "kind": "mcpServers" } | { "kind": "providersChanged" } | { "kind": "mcpQuestions" } | { "kind": "historyDamaged" } | { "kind": "stream", stream: number, message: unknown, } | { "kind": "streamEnded", stream: number, };

export type EventBatch = { events: Array<WindowEvent>, 
/**
 * The last event's number in its window's mailbox (1, 2, ...; 0 before the first).
 */
next: number, };
