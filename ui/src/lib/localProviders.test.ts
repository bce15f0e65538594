import { describe, expect, it, vi } from "vitest";
import { LocalProviders, type LocalProvidersApi } from "./localProviders.svelte";
import type { LocalProvider } from "./types";

const ollama: LocalProvider = {
  id: "ollama",
  name: "Ollama",
  protocol: "openai-chat",
  baseUrl: "http://127.0.0.1:11434/v1",
  models: ["llama3"],
};

function fakeApi() {
  return {
    detectLocalProviders: vi.fn<LocalProvidersApi["detectLocalProviders"]>(),
    addLocalProvider: vi.fn<LocalProvidersApi["addLocalProvider"]>(),
  };
}

describe("LocalProviders", () => {
  it("looks once and keeps what it found", async () => {
    const api = fakeApi();
    api.detectLocalProviders.mockResolvedValue([ollama]);
    const local = new LocalProviders(api);
    expect(local.found).toBeNull();
    local.look();
    local.look();
    await vi.waitFor(() => expect(local.found).toEqual([ollama]));
    expect(api.detectLocalProviders).toHaveBeenCalledTimes(1);
  });

  it("finds nothing when looking failed", async () => {
    const api = fakeApi();
    api.detectLocalProviders.mockRejectedValue(new Error("no loopback"));
    const local = new LocalProviders(api);
    local.look();
    await vi.waitFor(() => expect(local.found).toEqual([]));
  });

  it("adds a found server as a provider, or says why it could not", async () => {
    const api = fakeApi();
    api.addLocalProvider.mockResolvedValueOnce(undefined);
    const local = new LocalProviders(api);
    expect(await local.use(ollama)).toBeNull();
    expect(api.addLocalProvider).toHaveBeenCalledWith(ollama);
    api.addLocalProvider.mockRejectedValueOnce(new Error("a provider named ollama exists"));
    expect(await local.use(ollama)).toBe("a provider named ollama exists");
  });
});
