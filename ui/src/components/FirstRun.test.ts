import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { LocalProvider } from "../lib/types";
import ChatView from "./ChatView.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
const api = apiModule as unknown as ApiMock;

afterEach(() => resetApi(api));

const ollama: LocalProvider = {
  id: "ollama",
  name: "Ollama",
  protocol: "openai-chat",
  baseUrl: "http://127.0.0.1:11434/v1",
  models: ["llama3", "qwen3"],
};

function noProviders() {
  return {
    conversationId: null,
    title: "New chat",
    groups: [],
    providersSetUp: false,
    choice: null,
    mcp: null,
    onChoose: vi.fn(),
    onConversationStarted: vi.fn(),
    onChanged: vi.fn(),
    onOpenSettings: vi.fn(),
    onProvidersChanged: vi.fn(),
  };
}

describe("the first run", () => {
  it("explains Settings, then offers the model server found here and adds it", async () => {
    let answer: (found: LocalProvider[]) => void = () => {};
    api.detectLocalProviders.mockReturnValue(new Promise((done) => (answer = done)));
    api.addLocalProvider.mockResolvedValue(undefined);
    const props = noProviders();
    render(ChatView, props);
    const panel = screen.getByLabelText("First run");
    expect(panel.textContent).toContain("Set up a model to start");
    expect(panel.textContent).toContain("Looking for Ollama and LM Studio");
    await fireEvent.click(screen.getByRole("button", { name: "Open Settings" }));
    expect(props.onOpenSettings).toHaveBeenCalled();

    answer([ollama]);
    const use = await screen.findByRole("button", { name: "Use Ollama" });
    expect(panel.textContent).toContain("(2 models)");
    await fireEvent.click(use);
    expect(api.addLocalProvider).toHaveBeenCalledWith(ollama);
    await waitFor(() => expect(props.onProvidersChanged).toHaveBeenCalled());
    expect(api.detectLocalProviders).toHaveBeenCalledTimes(1);
  });

  it("shows why a found server could not be added", async () => {
    api.detectLocalProviders.mockResolvedValue([ollama]);
    api.addLocalProvider.mockRejectedValue(new Error("a provider named ollama exists"));
    const props = noProviders();
    render(ChatView, props);
    await fireEvent.click(await screen.findByRole("button", { name: "Use Ollama" }));
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("a provider named ollama exists");
    expect(props.onProvidersChanged).not.toHaveBeenCalled();
  });

  it("says nothing was found when looking found nothing", async () => {
    api.detectLocalProviders.mockResolvedValue([]);
    render(ChatView, noProviders());
    await waitFor(() => expect(screen.getByLabelText("First run").textContent).not.toContain("Looking for"));
    expect(screen.queryByText("Found on this computer:")).toBeNull();
  });

  it("offers local model servers only before any provider is set up", async () => {
    api.detectLocalProviders.mockResolvedValue([
      { id: "ollama", name: "Ollama", protocol: "openai-chat", baseUrl: "http://127.0.0.1:11434/v1", models: ["llama3"] },
    ]);
    const none = noProviders();
    const first = render(ChatView, none);
    expect(await screen.findByRole("button", { name: "Use Ollama" })).toBeTruthy();
    first.unmount();
    api.detectLocalProviders.mockClear();
    // A provider without models: Settings, not an offer the host would refuse.
    render(ChatView, { ...none, providersSetUp: true });
    expect(screen.getByLabelText("First run")).toBeTruthy();
    expect(screen.queryByRole("button", { name: "Use Ollama" })).toBeNull();
    expect(api.detectLocalProviders).not.toHaveBeenCalled();
  });
});
