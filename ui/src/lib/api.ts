// Typed wrappers over the backend's Tauri commands: the only way the UI gets data.
import { Channel, invoke } from "@tauri-apps/api/core";
import type {
  AppInfo,
  Conversation,
  Decision,
  LocalProvider,
  McpOverview,
  MediaRef,
  ProviderSummary,
  SearchHit,
  Started,
  StoredMessage,
  TurnEvent,
} from "./types";

/** The app's version and paths, from conduit-host. */
export function appInfo(): Promise<AppInfo> {
  return invoke<AppInfo>("app_info");
}

export function listConversations(): Promise<Conversation[]> {
  return invoke<Conversation[]>("list_conversations");
}

export function searchHistory(query: string): Promise<SearchHit[]> {
  return invoke<SearchHit[]>("search_history", { query });
}

/** Up to `limit` messages before message `before` (or the newest), oldest first. */
export function loadMessages(
  conversation: string,
  before: number | null,
  limit: number,
): Promise<StoredMessage[]> {
  return invoke<StoredMessage[]>("load_messages", { conversation, before, limit });
}

export function renameConversation(conversation: string, title: string): Promise<void> {
  return invoke("rename_conversation", { conversation, title });
}

export function deleteConversation(conversation: string): Promise<void> {
  return invoke("delete_conversation", { conversation });
}

export function listProviders(): Promise<ProviderSummary[]> {
  return invoke<ProviderSummary[]>("list_providers");
}

export function providerModels(provider: string): Promise<string[]> {
  return invoke<string[]>("provider_models", { provider });
}

export function detectLocalProviders(): Promise<LocalProvider[]> {
  return invoke<LocalProvider[]>("detect_local_providers");
}

/** Saves a local model server found on this machine as a provider (no key needed). */
export function addLocalProvider(provider: LocalProvider): Promise<void> {
  return invoke("add_local_provider", { provider });
}

export interface SendRequest {
  conversation: string | null;
  text: string;
  attachments: MediaRef[];
  provider: string;
  model: string | null;
}

/** Starts a turn; its events go to `onEvent` until one of type `ended`. */
export function sendMessage(
  request: SendRequest,
  onEvent: (event: TurnEvent) => void,
): Promise<Started> {
  const channel = new Channel<TurnEvent>();
  channel.onmessage = onEvent;
  return invoke<Started>("send_message", { request, onEvent: channel });
}

export function stopTurn(turn: string): Promise<void> {
  return invoke("stop_turn", { turn });
}

export function answerApproval(turn: string, callId: string, decision: Decision): Promise<boolean> {
  return invoke<boolean>("answer_approval", { turn, callId, decision });
}

/** Stores an attached image; its bytes travel as the raw request body. */
export async function storeAttachment(file: Blob): Promise<MediaRef> {
  const bytes = new Uint8Array(await file.arrayBuffer());
  return invoke<MediaRef>("store_attachment", bytes);
}

export function mcpServers(): Promise<McpOverview> {
  return invoke<McpOverview>("mcp_servers");
}

export function openExternal(url: string): Promise<void> {
  return invoke("open_external", { url });
}

/** The URL of a stored file (or its thumbnail) through the app's `media:` scheme. */
export function mediaUrl(media: MediaRef, thumbnail = false): string {
  const path = thumbnail ? `${media.hash}/thumb` : media.hash;
  // WebKitGTK and macOS use scheme://localhost; Windows' WebView2 uses http://scheme.localhost.
  return navigator.userAgent.includes("Windows")
    ? `http://media.localhost/${path}`
    : `media://localhost/${path}`;
}

/** A message fit for the window from whatever a command rejected with. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  return JSON.stringify(error);
}
