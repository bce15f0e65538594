// A recording a tool returned, made playable: WebKitGTK's media player cannot load the
// app's `media:` scheme (WebKit bug 146351, GStreamer has no source for it), so the page
// fetches the stored file (the host lets only this page read only audio) and plays it
// from a `blob:` URL, which every engine plays and seeks in. The card reads it only when
// the user plays it.

import { mediaUrl } from "./api";
import type { MediaRef } from "./types";

/** What the page needs from its environment: injected so tests can stand in for it. */
export interface ClipEnvironment {
  fetch: (url: string) => Promise<Pick<Response, "ok" | "status" | "blob">>;
  createObjectURL: (blob: Blob) => string;
  revokeObjectURL: (url: string) => void;
}

const browser: ClipEnvironment = {
  fetch: (url) => fetch(url),
  createObjectURL: (blob) => URL.createObjectURL(blob),
  revokeObjectURL: (url) => URL.revokeObjectURL(url),
};

/** A recording being loaded; `release` frees its bytes (now, or once they arrive). */
export interface AudioClip {
  /** The `blob:` URL to play, or why the recording cannot be played. */
  loaded: Promise<{ url: string } | { error: string }>;
  release: () => void;
}

export function openAudioClip(media: MediaRef, env: ClipEnvironment = browser): AudioClip {
  let released = false;
  let url: string | null = null;
  const loaded = (async () => {
    let response: Awaited<ReturnType<ClipEnvironment["fetch"]>>;
    try {
      response = await env.fetch(mediaUrl(media));
    } catch {
      // The fetch itself failed (an engine that sends no origin the host knows): the
      // player is given the file's URL, which engines other than WebKitGTK's play.
      return { url: mediaUrl(media) };
    }
    try {
      if (!response.ok) return { error: `the recording could not be read (${response.status})` };
      const blob = await response.blob();
      // The bytes are typed by the host's reading of them, not by what the server said.
      const typed = blob.type === media.mime ? blob : new Blob([blob], { type: media.mime });
      if (released) return { error: "released" };
      url = env.createObjectURL(typed);
      return { url };
    } catch (error) {
      return { error: `the recording could not be read: ${String(error)}` };
    }
  })();
  return {
    loaded,
    release() {
      released = true;
      if (url !== null) env.revokeObjectURL(url);
      url = null;
    },
  };
}
