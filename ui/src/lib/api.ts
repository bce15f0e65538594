// Typed wrappers over the backend's Tauri commands: the only way the UI gets data.
import { invoke } from "@tauri-apps/api/core";
import type { AppInfo } from "./types";

/** The app's version and paths, from conduit-host. */
export function appInfo(): Promise<AppInfo> {
  return invoke<AppInfo>("app_info");
}

/** A message fit for the window from whatever a command rejected with. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  return JSON.stringify(error);
}
