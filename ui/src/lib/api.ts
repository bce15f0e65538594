// The UI's only way to the backend: every command's typed wrapper, generated from the Rust
// command itself (commands.ts), and the helpers that call no command.
import type { CommandError, ErrorAction, MediaRef } from "./types";

export * from "./commands";

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
  return mediaPathUrl(path);
}

/** The URL of `path` on the app's `media:` scheme. */
export function mediaPathUrl(path: string): string {
  // WebKitGTK and macOS use scheme://localhost; Windows' WebView2 uses http://scheme.localhost.
  return navigator.userAgent.includes("Windows")
    ? `http://media.localhost/${path}`
    : `media://localhost/${path}`;
}

/**
 * The URL of a waiting sampling request's `ordinal`th image (counted through its messages
 * in order): a small PNG the host draws from it, never the server's bytes.
 */
export function samplingImageUrl(requestId: string, ordinal: number, whole = false): string {
  return mediaPathUrl(`sampling/${encodeURIComponent(requestId)}/${ordinal}${whole ? "/whole" : ""}`);
}

const ACTIONS: readonly ErrorAction[] = ["open_settings", "enter_client_id"];

/**
 * What a command rejected with, as the typed error every command rejects with (a
 * CommandError from the host); anything else (a failure in the page itself) becomes its text.
 */
export function commandError(error: unknown): CommandError {
  if (typeof error === "object" && error !== null && "message" in error) {
    const { message, action } = error as { message: unknown; action?: unknown };
    const known = ACTIONS.find((a) => a === action);
    return known ? { message: String(message), action: known } : { message: String(message) };
  }
  if (typeof error === "string") return { message: error };
  return { message: JSON.stringify(error) };
}

/** A message fit for the window from whatever a command rejected with. */
export function errorMessage(error: unknown): string {
  return commandError(error).message;
}
