// Typed wrappers over the backend's Tauri commands: the only way the UI gets data.
import { Channel, invoke, type InvokeArgs } from "@tauri-apps/api/core";
import type { CommandName } from "./bindings";
import type {
  AppInfo,
  Conversation,
  Decision,
  ImportCandidate,
  ImportFile,
  ImportPick,
  ImportSource,
  LocalProvider,
  McpEdit,
  McpFile,
  McpOverview,
  MediaRef,
  ProviderInput,
  ProviderSummary,
  SendRequest,
  SearchHit,
  Started,
  StoredMessage,
  TextProblem,
  ToolPolicy,
  ServerTools,
  TurnEvent,
} from "./types";

/** Calls a command by its name in src-tauri/commands.list (another name fails svelte-check). */
function command<T>(name: CommandName, args?: InvokeArgs): Promise<T> {
  // Exactly the arguments given: a command without any gets none.
  return args === undefined ? invoke<T>(name) : invoke<T>(name, args);
}

/** The app's version and paths, from conduit-host. */
export function appInfo(): Promise<AppInfo> {
  return command<AppInfo>("app_info");
}

export function listConversations(): Promise<Conversation[]> {
  return command<Conversation[]>("list_conversations");
}

export function searchHistory(query: string): Promise<SearchHit[]> {
  return command<SearchHit[]>("search_history", { query });
}

/** Up to `limit` messages before message `before` (or the newest), oldest first. */
export function loadMessages(
  conversation: string,
  before: number | null,
  limit: number,
): Promise<StoredMessage[]> {
  return command<StoredMessage[]>("load_messages", { conversation, before, limit });
}

export function renameConversation(conversation: string, title: string): Promise<void> {
  return command("rename_conversation", { conversation, title });
}

export function deleteConversation(conversation: string): Promise<void> {
  return command("delete_conversation", { conversation });
}

export function listProviders(): Promise<ProviderSummary[]> {
  return command<ProviderSummary[]>("list_providers");
}

export function providerModels(provider: string): Promise<string[]> {
  return command<string[]>("provider_models", { provider });
}

export function detectLocalProviders(): Promise<LocalProvider[]> {
  return command<LocalProvider[]>("detect_local_providers");
}

/** Saves a local model server found on this machine as a provider (no key needed). */
export function addLocalProvider(provider: LocalProvider): Promise<void> {
  return command("add_local_provider", { provider });
}

/** Starts a turn; its events go to `onEvent` until one of type `ended`. */
export function sendMessage(
  request: SendRequest,
  onEvent: (event: TurnEvent) => void,
): Promise<Started> {
  const channel = new Channel<TurnEvent>();
  channel.onmessage = onEvent;
  return command<Started>("send_message", { request, onEvent: channel });
}

export function stopTurn(turn: string): Promise<void> {
  return command("stop_turn", { turn });
}

export function answerApproval(turn: string, callId: string, decision: Decision): Promise<boolean> {
  return command<boolean>("answer_approval", { turn, callId, decision });
}

/** Stores an attached image; its bytes travel as the raw request body. */
export async function storeAttachment(file: Blob): Promise<MediaRef> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  return command<MediaRef>("store_attachment", bytes);
}

export function mcpServers(): Promise<McpOverview> {
  return command<McpOverview>("mcp_servers");
}

export function openExternal(url: string): Promise<void> {
  return command("open_external", { url });
}

/**
 * The URL of a stored file through the app's `media:` scheme: the file itself, its small
 * thumbnail (`true`), or the image sized to one of THUMBNAIL_WIDTHS (a number).
 */
export function mediaUrl(media: MediaRef, thumbnail: boolean | number = false): string {
  const path =
    typeof thumbnail === "number"
      ? `${media.hash}/w/${thumbnail}`
      : thumbnail
        ? `${media.hash}/thumb`
        : media.hash;
  // WebKitGTK and macOS use scheme://localhost; Windows' WebView2 uses http://scheme.localhost.
  return navigator.userAgent.includes("Windows")
    ? `http://media.localhost/${path}`
    : `media://localhost/${path}`;
}

export function saveProvider(provider: ProviderInput): Promise<void> {
  return command("save_provider", { provider });
}

export function removeProvider(provider: string): Promise<void> {
  return command("remove_provider", { provider });
}

export function mcpFile(): Promise<McpFile> {
  return command<McpFile>("mcp_file");
}

/** Applies a change made on `version` of the file; rejected if the file changed since. */
export function editMcpFile(version: string | null, edit: McpEdit): Promise<McpFile> {
  return command<McpFile>("edit_mcp_file", { version, edit });
}

/** The problem the raw editor's text has (null: it would save). */
export function checkMcpText(text: string): Promise<TextProblem | null> {
  return command<TextProblem | null>("check_mcp_text", { text });
}

/** Where other apps keep their servers on this machine (the page names one by id). */
export function mcpImportFiles(): Promise<ImportFile[]> {
  return command<ImportFile[]>("mcp_import_files");
}

/** Lets the user pick a config file in a native dialog; its name, or null if cancelled. */
export function pickMcpImportFile(): Promise<string | null> {
  return command<string | null>("pick_mcp_import_file");
}

/** The servers of a known or picked file, their secret values masked. */
export function mcpImportCandidates(source: ImportSource): Promise<ImportCandidate[]> {
  return command<ImportCandidate[]>("mcp_import_candidates", { source });
}

/** Adds picked servers from a known or picked file; Conduit asks the user natively first. */
export function importMcpServers(
  version: string | null,
  source: ImportSource,
  picks: ImportPick[],
): Promise<McpFile> {
  return command<McpFile>("import_mcp_servers", { version, source, picks });
}

/** The file with its secret values in clear, once the user confirms natively. */
export function revealMcpFile(): Promise<McpFile> {
  return command<McpFile>("reveal_mcp_file");
}

/** Opens Settings in its own window (the chat window cannot change settings). */
export function openSettings(): Promise<void> {
  return command("open_settings");
}

export function mcpServerTools(server: string): Promise<ServerTools> {
  return command<ServerTools>("mcp_server_tools", { server });
}

/** The approval policy of a server's tools that have none of their own. */
export function setServerPolicy(server: string, policy: ToolPolicy): Promise<void> {
  return command("set_server_policy", { server, policy });
}

export function restartMcpServer(server: string): Promise<void> {
  return command("restart_mcp_server", { server });
}

export function setToolEnabled(server: string, tool: string, enabled: boolean): Promise<void> {
  return command("set_tool_enabled", { server, tool, enabled });
}

export function setToolPolicy(server: string, tool: string, policy: ToolPolicy): Promise<void> {
  return command("set_tool_policy", { server, tool, policy });
}

/** Opens one of Conduit's folders in the file manager. */
export function openFolder(folder: "data" | "logs" | "config"): Promise<void> {
  return command("open_folder", { folder });
}

/** Opens a stored file (a long tool output kept whole) in the system's app for it. */
export function openMedia(media: MediaRef): Promise<void> {
  return command("open_media", { hash: media.hash });
}

/** A message fit for the window from whatever a command rejected with. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  return JSON.stringify(error);
}

/** Puts a stored image on the system clipboard. */
export function copyImage(hash: string): Promise<void> {
  return command("copy_image", { hash });
}

/** The image on the system clipboard as a PNG file (for a paste that carried no data). */
export async function clipboardImage(): Promise<File> {
  const bytes = await command<ArrayBuffer>("clipboard_image");
  return new File([bytes], "pasted image.png", { type: "image/png" });
}

/** Saves a stored image where the person picks in the system's save dialog; null if cancelled. */
export function saveImage(hash: string): Promise<string | null> {
  return command<string | null>("save_image", { hash });
}
