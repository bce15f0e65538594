// Generated from the Rust commands (window_command! in src-tauri) by src-tauri/src/bindings_tests.rs: do not edit.
// Regenerate with `UPDATE_BINDINGS=1 cargo test --workspace bindings`.
import { invoke } from "@tauri-apps/api/core";
import type { AppInfo, MediaRef, StoredMessage, Conversation, SearchHit, HistoryDamage, TurnEvent, Started, SendRequest, ProviderSummary, LocalProvider, ProviderInput, ServerOutput, McpOverview, Decision, ConversationAllow, TextProblem, McpFile, Edit, ImportFile, Folder, ImportSource, ImportPick, ImportCandidate, ToolPolicy, ServerTools, Question, QuestionReply, SamplingQuestion, SamplingReply, ViewLookup, ViewCall, ViewCallResult, ServeSnippets, ServeHttpStatus, SignedOut, Toolset, ToolChoices, Format, Mentionables, CompletionTarget, EventBatch } from "./bindings";
import { forgetStreams, openStream } from "./windowEvents";

/** The app's version and where its data lives. */
export function appInfo(): Promise<AppInfo> {
  return invoke<AppInfo>("app_info");
}

/**
 * The calling window's events after number `after` (the `next` of the last answer, 0 at
 * first), waiting for one if there are none yet (at most 25 s, then it answers none).
 */
export function nextWindowEvents(after: number): Promise<EventBatch> {
  return invoke<EventBatch>("next_window_events", { after });
}

/**
 * The `count` most recently updated conversations (the sidebar asks for 500 more each
 * time it shows older ones), at most 20,000.
 */
export function listConversations(count: number): Promise<Array<Conversation>> {
  return invoke<Array<Conversation>>("list_conversations", { count });
}

/**
 * Damage the check of the whole history found while the app has it open, if any: the
 * file stays in use until the next start moves it aside and begins a new one.
 */
export function historyDamage(): Promise<HistoryDamage | null> {
  return invoke<HistoryDamage | null>("history_damage");
}

export function searchHistory(query: string): Promise<Array<SearchHit>> {
  return invoke<Array<SearchHit>>("search_history", { query });
}

/** Up to `limit` messages before message `before` (or the newest), oldest first. */
export function loadMessages(conversation: string, before: number | null, limit: number): Promise<Array<StoredMessage>> {
  return invoke<Array<StoredMessage>>("load_messages", { conversation, before, limit });
}

export function renameConversation(conversation: string, title: string): Promise<void> {
  return invoke<void>("rename_conversation", { conversation, title });
}

/** Pins a conversation to the top of the list, or unpins it. */
export function pinConversation(conversation: string, pinned: boolean): Promise<void> {
  return invoke<void>("pin_conversation", { conversation, pinned });
}

/**
 * Deletes a conversation after the user confirmed it natively (a page script cannot
 * delete history alone); `false` when the user kept it.
 */
export function deleteConversation(conversation: string): Promise<boolean> {
  return invoke<boolean>("delete_conversation", { conversation });
}

/**
 * Exports a conversation (Markdown or JSON) to a file the user picks in a native save
 * dialog, its images and long outputs in a folder beside it; `None` when they cancel.
 * The page names only the conversation and the format.
 */
export function exportConversation(conversation: string, format: Format): Promise<string | null> {
  return invoke<string | null>("export_conversation", { conversation, format });
}

export function listProviders(): Promise<Array<ProviderSummary>> {
  return invoke<Array<ProviderSummary>>("list_providers");
}

export function providerModels(provider: string): Promise<Array<string>> {
  return invoke<Array<string>>("provider_models", { provider });
}

/** Ollama and LM Studio, if they answer on this machine. */
export function detectLocalProviders(): Promise<Array<LocalProvider>> {
  return invoke<Array<LocalProvider>>("detect_local_providers");
}

/**
 * Saves a local model server the window found as a provider (no key; its first model
 * is the default).
 */
export function addLocalProvider(provider: LocalProvider): Promise<void> {
  return invoke<void>("add_local_provider", { provider });
}

/**
 * Starts a turn; its events arrive on `on_event`, the last one `ended`. A turn that
 * cannot start is refused with what to do. Async so that the turn's task starts on the
 * app's runtime.
 */
export function sendMessage(request: SendRequest, onEvent: (message: TurnEvent) => void): Promise<Started> {
  const onEventStream = openStream<TurnEvent>(onEvent);
  return invoke<Started>("send_message", { request, onEvent: onEventStream }).catch(forgetStreams(onEventStream));
}

export function stopTurn(turn: string): Promise<void> {
  return invoke<void>("stop_turn", { turn });
}

/** A turn waiting for servers to start begins without them; it only takes tools away. */
export function answerWithoutWaiting(turn: string): Promise<void> {
  return invoke<void>("answer_without_waiting", { turn });
}

/**
 * What a toolset offers among the ready servers' tools: `toolset` as the window holds it
 * for a new chat, else the conversation's own.
 */
export function toolChoices(conversation: string | null, toolset: Toolset | null): Promise<ToolChoices> {
  return invoke<ToolChoices>("tool_choices", { conversation, toolset });
}

/**
 * What the ready servers offer to mention in a message: resources, resource templates
 * and prompts (the composer's `@` and `/`).
 */
export function mentionables(): Promise<Mentionables> {
  return invoke<Mentionables>("mentionables");
}

/** A server's suggestions for an argument of a template or prompt being filled in. */
export function completeMention(server: string, target: CompletionTarget, argument: string, value: string): Promise<Array<string>> {
  return invoke<Array<string>>("complete_mention", { server, target, argument, value });
}

/** Keeps the tools a saved conversation may use. */
export function setConversationToolset(conversation: string, toolset: Toolset): Promise<void> {
  return invoke<void>("set_conversation_toolset", { conversation, toolset });
}

/** A conversation's instructions to the model (empty: none). */
export function conversationInstructions(conversation: string): Promise<string> {
  return invoke<string>("conversation_instructions", { conversation });
}

/** Keeps a conversation's instructions to the model for its next turns. */
export function setConversationInstructions(conversation: string, instructions: string): Promise<void> {
  return invoke<void>("set_conversation_instructions", { conversation, instructions });
}

/** The tools allowed in a conversation until Conduit quits. */
export function conversationAllows(conversation: string): Promise<Array<ConversationAllow>> {
  return invoke<Array<ConversationAllow>>("conversation_allows", { conversation });
}

/** Takes back a tool's allow in a conversation; it only takes a permission away. */
export function revokeConversationAllow(conversation: string, server: string, tool: string): Promise<boolean> {
  return invoke<boolean>("revoke_conversation_allow", { conversation, server, tool });
}

/**
 * Answers a call's approval question; "Always allow" only after the user confirms it
 * natively (a script in the page cannot save an allow alone).
 */
export function answerApproval(turn: string, callId: string, decision: Decision): Promise<boolean> {
  return invoke<boolean>("answer_approval", { turn, callId, decision });
}

/** The questions MCP servers are asking the user (elicitation), oldest first. */
export function mcpQuestions(): Promise<Array<Question>> {
  return invoke<Array<Question>>("mcp_questions");
}

/**
 * Answers a server's question. A form's values must fit its schema (the host checks);
 * consent to open a page counts only after the user saw the whole URL in a native
 * confirmation, and the page opens in the system browser through the link policy.
 */
export function answerQuestion(id: string, reply: QuestionReply): Promise<void> {
  return invoke<void>("answer_question", { id, reply });
}

/**
 * The sampling requests MCP servers sent (a model run they ask for), oldest first, with
 * where each is (asking, running, a result to review, failed).
 */
export function mcpSamplingRequests(): Promise<Array<SamplingQuestion>> {
  return invoke<Array<SamplingQuestion>>("mcp_sampling_requests");
}

/**
 * Answers a sampling request: run it on a provider and model, send the result shown,
 * or deny it. The host checks that the reply fits where the request is.
 */
export function answerSampling(id: string, reply: SamplingReply): Promise<void> {
  return invoke<void>("answer_sampling", { id, reply });
}

/** Stores an image the user attached; the request body is its bytes. */
export async function storeAttachment(request: Blob): Promise<MediaRef> {
  return invoke<MediaRef>("store_attachment", new Uint8Array(await request.arrayBuffer()));
}

export function mcpServers(): Promise<McpOverview> {
  return invoke<McpOverview>("mcp_servers");
}

/**
 * Opens a link from a message in the system browser (never inside the app), after the
 * user saw the whole URL in a native confirmation.
 */
export function openExternal(url: string): Promise<void> {
  return invoke<void>("open_external", { url });
}

/** Opens Settings in its own window: only that window may change settings. */
export function openSettings(): Promise<void> {
  return invoke<void>("open_settings");
}

/**
 * Adds or updates a provider; a save that loses a stored secret (the key replaced, or
 * deleted as the provider moves to another server, a header value dropped) is written
 * only after the user confirms it natively, and `false` when they kept it as it was.
 */
export function saveProvider(provider: ProviderInput): Promise<boolean> {
  return invoke<boolean>("save_provider", { provider });
}

/**
 * Removes a provider and its stored key after the user confirmed it natively; `false`
 * when the user kept it.
 */
export function removeProvider(provider: string): Promise<boolean> {
  return invoke<boolean>("remove_provider", { provider });
}

export function mcpFile(): Promise<McpFile> {
  return invoke<McpFile>("mcp_file");
}

/**
 * Applies the window's change; one that would start a new or changed command, connect
 * to a new or changed URL or delete a server is written only after the user confirms it
 * natively.
 */
export function editMcpFile(version: string | null, edit: Edit): Promise<McpFile> {
  return invoke<McpFile>("edit_mcp_file", { version, edit });
}

/** The file with its secret values in clear, after the user confirmed it natively. */
export function revealMcpFile(): Promise<McpFile> {
  return invoke<McpFile>("reveal_mcp_file");
}

export function checkMcpText(text: string): Promise<TextProblem | null> {
  return invoke<TextProblem | null>("check_mcp_text", { text });
}

/** Where other apps keep their servers on this machine. */
export function mcpImportFiles(): Promise<Array<ImportFile>> {
  return invoke<Array<ImportFile>>("mcp_import_files");
}

/**
 * Lets the user pick a config file in a native dialog; its path stays here. `None` when
 * they cancel.
 */
export function pickMcpImportFile(): Promise<string | null> {
  return invoke<string | null>("pick_mcp_import_file");
}

/** The servers of a known or picked config file, their secret values masked. */
export function mcpImportCandidates(source: ImportSource): Promise<Array<ImportCandidate>> {
  return invoke<Array<ImportCandidate>>("mcp_import_candidates", { source });
}

/**
 * Adds the picked servers of a known or picked file, after the user confirms what they
 * would start.
 */
export function importMcpServers(version: string | null, source: ImportSource, picks: Array<ImportPick>): Promise<McpFile> {
  return invoke<McpFile>("import_mcp_servers", { version, source, picks });
}

export function mcpServerTools(server: string): Promise<ServerTools> {
  return invoke<ServerTools>("mcp_server_tools", { server });
}

/** What a server wrote to stderr and sent as log messages lately, for Settings' Log. */
export function mcpServerOutput(server: string): Promise<ServerOutput> {
  return invoke<ServerOutput>("mcp_server_output", { server });
}

export function restartMcpServer(server: string): Promise<void> {
  return invoke<void>("restart_mcp_server", { server });
}

/**
 * Signs in to an HTTP server in the system browser: the authorization URL comes on
 * `on_url`, to be shown in full; resolves once the browser came back and the server
 * started again. The host finds the URL (from the server's metadata, a web page only).
 */
export function mcpSignIn(server: string, onUrl: (message: string) => void): Promise<void> {
  const onUrlStream = openStream<string>(onUrl);
  return invoke<void>("mcp_sign_in", { server, onUrl: onUrlStream }).catch(forgetStreams(onUrlStream));
}

/**
 * Signs out of a server, once the user confirmed it natively (a stored sign-in cannot be
 * had back without the browser): its tokens revoked where offered, and forgotten; `None`
 * when the user kept it.
 */
export function mcpSignOut(server: string): Promise<SignedOut | null> {
  return invoke<SignedOut | null>("mcp_sign_out", { server });
}

/** Whether a server's sign-in is stored. */
export function mcpSignedIn(server: string): Promise<boolean> {
  return invoke<boolean>("mcp_signed_in", { server });
}

/** How other apps (Claude Desktop, Cursor, VS Code) start Conduit as their MCP server. */
export function mcpServeSnippets(): Promise<ServeSnippets> {
  return invoke<ServeSnippets>("mcp_serve_snippets");
}

/** Whether Conduit serves MCP over HTTP from the app, where, and its token masked. */
export function mcpHttpStatus(): Promise<ServeHttpStatus> {
  return invoke<ServeHttpStatus>("mcp_http_status");
}

/**
 * Starts or stops serving MCP over HTTP on a loopback address (kept in settings).
 * Serving, or serving somewhere new, opens a port to the user's conversations: only
 * after a native confirmation naming the address. Stopping needs none.
 */
export function setMcpHttp(enabled: boolean, address: string): Promise<ServeHttpStatus> {
  return invoke<ServeHttpStatus>("set_mcp_http", { enabled, address });
}

/**
 * Copies the HTTP endpoint's token to the clipboard after the user confirmed it
 * natively: the page never holds it.
 */
export function copyMcpToken(): Promise<void> {
  return invoke<void>("copy_mcp_token");
}

export function setToolEnabled(server: string, tool: string, enabled: boolean): Promise<void> {
  return invoke<void>("set_tool_enabled", { server, tool, enabled });
}

/**
 * Sets when a tool runs; an allow is refused when the tool is no longer what `shown`
 * (from `mcp_server_tools`) says the window showed, and saved only after the user
 * confirms it natively.
 */
export function setToolPolicy(server: string, tool: string, policy: ToolPolicy, shown: string): Promise<void> {
  return invoke<void>("set_tool_policy", { server, tool, policy, shown });
}

/**
 * Sets when a server's tools run; an allow is refused when its tools are no longer what
 * `shown` (from `mcp_server_tools`) says the window showed, and saved only after the
 * user confirms it natively.
 */
export function setServerPolicy(server: string, policy: ToolPolicy, shown: string): Promise<void> {
  return invoke<void>("set_server_policy", { server, policy, shown });
}

/**
 * Sets what happens to a server's sampling requests (ask, allow, deny); an allow is
 * saved only after the user confirms it natively.
 */
export function setSamplingPolicy(server: string, policy: ToolPolicy): Promise<void> {
  return invoke<void>("set_sampling_policy", { server, policy });
}

/** Opens one of Conduit's own folders (`data`, `logs`, `config`) in the file manager. */
export function openFolder(folder: Folder): Promise<void> {
  return invoke<void>("open_folder", { folder });
}

/**
 * Opens a stored file (a long tool output kept whole, a PDF) in the system's app for its
 * type. A PDF opens only after a native confirmation: the page names the file by hash,
 * and a script there could otherwise open a server's PDF in the system's viewer without
 * a click (a hash it named in a message of its own counts for nothing).
 */
export function openMedia(media: MediaRef): Promise<void> {
  return invoke<void>("open_media", { media });
}

/**
 * The view of the call `call` (Conduit's id) in `conversation`, opened under a new token;
 * or why there is none. The host decides whether it ran that call, and on which server
 * and tool; the page only names it.
 */
export function openAppView(call: string, conversation: string | null): Promise<ViewLookup> {
  return invoke<ViewLookup>("open_app_view", { call, conversation });
}

/** Forgets a view the window unmounted. */
export function closeAppView(token: string): Promise<void> {
  return invoke<void>("close_app_view", { token });
}

/**
 * Runs a view's `tools/call`: only its own server's tools that views may call, by the
 * tool's policy in Settings; "ask" is a native confirmation the page cannot answer.
 */
export function appViewCallTool(token: string, call: ViewCall): Promise<ViewCallResult> {
  return invoke<ViewCallResult>("app_view_call_tool", { token, call });
}

/**
 * Keeps what a view wants the model to know (`ui/update-model-context`) for the next
 * message that names the view.
 */
export function setAppViewContext(token: string, text: string): Promise<void> {
  return invoke<void>("set_app_view_context", { token, text });
}

/**
 * Opens a link a view asks for (`ui/open-link`) in the system browser, after a native
 * confirmation that names the view's server and shows the whole URL.
 */
export function appViewOpenLink(token: string, url: string): Promise<void> {
  return invoke<void>("app_view_open_link", { token, url });
}

/** Puts a stored image on the system clipboard (as pixels; the system offers it as PNG). */
export function copyImage(hash: string): Promise<void> {
  return invoke<void>("copy_image", { hash });
}

/**
 * Asks where to save a stored image with the system's save dialog and copies it there.
 * `Ok(None)` when the person cancels; `Ok(Some(path))` where it was saved.
 */
export function saveImage(hash: string): Promise<string | null> {
  return invoke<string | null>("save_image", { hash });
}

/**
 * Stores the image on the system clipboard in the media store, for a paste the webview
 * cannot read itself (WebKitGTK gives a page no image data from the clipboard): the
 * window attaches the stored image like a picked file and never holds its bytes. Off
 * the main thread: reading the clipboard there can deadlock on Linux.
 */
export function clipboardImage(): Promise<MediaRef> {
  return invoke<MediaRef>("clipboard_image");
}
