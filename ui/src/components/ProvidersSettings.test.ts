import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import ProvidersSettings from "./ProvidersSettings.svelte";

const invoke = vi.hoisted(() => vi.fn());
vi.mock("@tauri-apps/api/core", () => ({ invoke }));

const saved = {
  id: "claude",
  protocol: "anthropic",
  baseUrl: "https://api.anthropic.com",
  defaultModel: "claude-sonnet",
  headers: { "x-team": "a" },
  key: "stored in file",
};

afterEach(() => invoke.mockReset());

describe("Providers settings", () => {
  it("saves a new provider with its key and forgets the key afterwards", async () => {
    const listed: unknown[] = [];
    invoke.mockImplementation((command: string, args?: Record<string, unknown>) => {
      if (command === "list_providers") return Promise.resolve(listed);
      if (command === "detect_local_providers") return Promise.resolve([]);
      if (command === "save_provider") {
        listed.push(saved);
        return Promise.resolve(args);
      }
      return Promise.reject(new Error(command));
    });
    const onChanged = vi.fn();
    render(ProvidersSettings, { onChanged });
    await fireEvent.click(await screen.findByRole("button", { name: "Add provider" }));
    await fireEvent.input(screen.getByLabelText("Provider id"), { target: { value: "claude" } });
    await fireEvent.input(screen.getByLabelText("API key"), { target: { value: "sk-secret-1" } });
    await fireEvent.input(screen.getByLabelText("Default model"), {
      target: { value: "claude-sonnet" },
    });
    await fireEvent.click(screen.getByRole("button", { name: "Save provider" }));
    await waitFor(() => expect(onChanged).toHaveBeenCalled());
    expect(invoke).toHaveBeenCalledWith("save_provider", {
      provider: {
        id: "claude",
        protocol: "anthropic",
        baseUrl: "https://api.anthropic.com",
        defaultModel: "claude-sonnet",
        headers: {},
        apiKey: "sk-secret-1",
        isNew: true,
      },
    });
    await screen.findByLabelText("Provider claude");
    expect(screen.queryByLabelText("API key")).toBeNull();
    expect(document.body.innerHTML).not.toContain("sk-secret-1");
    expect(screen.getByLabelText("Key status").textContent).toContain("••••");
  });

  it("keeps the stored key when an edit leaves the key empty, and shows a test's error", async () => {
    invoke.mockImplementation((command: string) => {
      if (command === "list_providers") return Promise.resolve([saved]);
      if (command === "detect_local_providers") return Promise.resolve([]);
      if (command === "save_provider") return Promise.resolve();
      if (command === "provider_models")
        return Promise.reject("the provider refused the key (401): invalid x-api-key");
      return Promise.reject(new Error(command));
    });
    render(ProvidersSettings, { onChanged: () => {} });
    await fireEvent.click(await screen.findByRole("button", { name: "Test connection" }));
    expect((await screen.findByLabelText("Connection test")).textContent).toContain("401");
    await fireEvent.click(screen.getByRole("button", { name: "Edit" }));
    expect((screen.getByLabelText("Header name 1") as HTMLInputElement).value).toBe("x-team");
    await fireEvent.click(screen.getByRole("button", { name: "Save provider" }));
    await waitFor(() =>
      expect(invoke).toHaveBeenCalledWith(
        "save_provider",
        expect.objectContaining({ provider: expect.objectContaining({ apiKey: null }) }),
      ),
    );
  });
});
