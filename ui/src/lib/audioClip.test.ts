import { describe, expect, it, vi } from "vitest";
import { openAudioClip, type ClipEnvironment } from "./audioClip";
import type { MediaRef } from "./types";

const memo: MediaRef = { hash: "a".repeat(64), mime: "audio/wav", bytes: 882044, width: null, height: null };

function environment(response: { ok: boolean; status: number; body?: Blob }) {
  let resolve: () => void = () => {};
  const arrived = new Promise<void>((done) => (resolve = done));
  const env = {
    fetch: vi.fn(async () => {
      await arrived;
      return { ok: response.ok, status: response.status, blob: async () => response.body ?? new Blob() };
    }),
    createObjectURL: vi.fn((_blob: Blob) => "blob:tauri://localhost/1"),
    revokeObjectURL: vi.fn(),
  } satisfies ClipEnvironment;
  return { env, arrive: resolve };
}

describe("openAudioClip", () => {
  it("plays the stored file from a blob URL typed as the host read it, freed on release", async () => {
    const { env, arrive } = environment({ ok: true, status: 200, body: new Blob(["RIFF"]) });
    const clip = openAudioClip(memo, env);
    arrive();
    expect(await clip.loaded).toEqual({ url: "blob:tauri://localhost/1" });
    expect(env.fetch).toHaveBeenCalledWith(`media://localhost/${memo.hash}`);
    const blob = env.createObjectURL.mock.calls[0]?.[0];
    expect(blob?.type).toBe("audio/wav");
    clip.release();
    expect(env.revokeObjectURL).toHaveBeenCalledWith("blob:tauri://localhost/1");
    clip.release();
    expect(env.revokeObjectURL).toHaveBeenCalledTimes(1);
  });

  it("makes no URL for a clip released while its bytes were on their way", async () => {
    const { env, arrive } = environment({ ok: true, status: 200 });
    const clip = openAudioClip(memo, env);
    clip.release();
    arrive();
    expect(await clip.loaded).toEqual({ error: "released" });
    expect(env.createObjectURL).not.toHaveBeenCalled();
  });

  it("says why a recording cannot be read, and plays the file itself when it cannot be fetched", async () => {
    const { env, arrive } = environment({ ok: false, status: 404 });
    const clip = openAudioClip(memo, env);
    arrive();
    expect(await clip.loaded).toEqual({ error: "the recording could not be read (404)" });
    // The fetch itself refused (an engine whose origin the host does not know): the
    // player gets the file's own URL, which such engines play.
    const failing: ClipEnvironment = {
      ...env,
      fetch: () => Promise.reject(new TypeError("Load failed")),
    };
    const direct = openAudioClip(memo, failing);
    expect(await direct.loaded).toEqual({ url: `media://localhost/${memo.hash}` });
    direct.release();
    expect(env.revokeObjectURL).not.toHaveBeenCalled();
  });
});
