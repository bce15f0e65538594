import { fireEvent, render, screen, waitFor, within } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { ProviderSummary } from "../lib/types";
import ProvidersSettings from "./ProvidersSettings.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
const api = apiModule as unknown as ApiMock;

const saved: ProviderSummary = {
  id: "claude",
  protocol: "anthropic",
  baseUrl: "https://api.anthropic.com",
  defaultModel: "claude-sonnet",
  headers: { "x-team": "a" },
  key: "stored in file",
};

afterEach(() => resetApi(api));

describe("Providers settings", () => {
  it("saves a new provider with its key and forgets the key afterwards", async () => {
    const listed: ProviderSummary[] = [];
    api.listProviders.mockImplementation(() => Promise.resolve(listed));
    api.detectLocalProviders.mockResolvedValue([]);
    api.saveProvider.mockImplementation(() => {
      listed.push(saved);
      return Promise.resolve(true);
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
    expect(api.saveProvider).toHaveBeenCalledWith({
      id: "claude",
      protocol: "anthropic",
      baseUrl: "https://api.anthropic.com",
      defaultModel: "claude-sonnet",
      headers: {},
      apiKey: "sk-secret-1",
      isNew: true,
    });
    await screen.findByLabelText("Provider claude");
    expect(screen.queryByLabelText("API key")).toBeNull();
    expect(document.body.innerHTML).not.toContain("sk-secret-1");
    expect(screen.getByLabelText("Key status").textContent).toContain("••••");
  });

  it("keeps a provider being edited: another Edit or Add waits until it is saved or cancelled", async () => {
    const other: ProviderSummary = { ...saved, id: "openai", protocol: "openai-responses", baseUrl: "https://api.openai.com/v1" };
    api.listProviders.mockResolvedValue([saved, other]);
    api.detectLocalProviders.mockResolvedValue([]);
    render(ProvidersSettings);
    const claude = await screen.findByLabelText("Provider claude");
    await fireEvent.click(within(claude).getByRole("button", { name: "Edit" }));
    await fireEvent.input(screen.getByLabelText("API key"), { target: { value: "sk-typed-not-saved" } });
    const openai = screen.getByLabelText("Provider openai");
    const edit = within(openai).getByRole("button", { name: "Edit" }) as HTMLButtonElement;
    const add = screen.getByRole("button", { name: "Add provider" }) as HTMLButtonElement;
    expect(edit.disabled).toBe(true);
    expect(add.disabled).toBe(true);
    // What was typed is still there.
    expect((screen.getByLabelText("API key") as HTMLInputElement).value).toBe("sk-typed-not-saved");
    await fireEvent.click(screen.getByRole("button", { name: "Cancel" }));
    expect(edit.disabled).toBe(false);
  });

  it("asks the host to remove a provider, which confirms it natively", async () => {
    const listed: ProviderSummary[] = [saved];
    api.listProviders.mockImplementation(() => Promise.resolve([...listed]));
    api.detectLocalProviders.mockResolvedValue([]);
    // The user keeps it in the host's dialog, then removes it.
    api.removeProvider.mockResolvedValueOnce(false).mockImplementationOnce(() => {
      listed.pop();
      return Promise.resolve(true);
    });
    const onChanged = vi.fn();
    render(ProvidersSettings, { onChanged });
    const row = await screen.findByLabelText("Provider claude");
    await fireEvent.click(within(row).getByRole("button", { name: "Remove" }));
    await waitFor(() => expect(api.removeProvider).toHaveBeenCalledTimes(1));
    expect(screen.queryByRole("alertdialog")).toBeNull();
    expect(onChanged).not.toHaveBeenCalled();
    expect(screen.getByLabelText("Provider claude")).toBeTruthy();
    await fireEvent.click(within(row).getByRole("button", { name: "Remove" }));
    await waitFor(() => expect(screen.queryByLabelText("Provider claude")).toBeNull());
    expect(api.removeProvider).toHaveBeenCalledWith("claude");
    expect(onChanged).toHaveBeenCalledTimes(1);
  });

  it("keeps the stored key when an edit leaves the key empty, and shows a test's error", async () => {
    api.listProviders.mockResolvedValue([saved]);
    api.detectLocalProviders.mockResolvedValue([]);
    api.saveProvider.mockResolvedValue(true);
    api.providerModels.mockRejectedValue("the provider refused the key (401): invalid x-api-key");
    render(ProvidersSettings, { onChanged: () => {} });
    await fireEvent.click(await screen.findByRole("button", { name: "Test connection" }));
    expect((await screen.findByLabelText("Connection test")).textContent).toContain("401");
    await fireEvent.click(screen.getByRole("button", { name: "Edit" }));
    expect((screen.getByLabelText("Header name 1") as HTMLInputElement).value).toBe("x-team");
    await fireEvent.click(screen.getByRole("button", { name: "Save provider" }));
    await waitFor(() =>
      expect(api.saveProvider).toHaveBeenCalledWith(expect.objectContaining({ apiKey: null })),
    );
  });

  it("keeps the form open when the user keeps the stored values in the host's dialog", async () => {
    api.listProviders.mockResolvedValue([saved]);
    api.detectLocalProviders.mockResolvedValue([]);
    api.saveProvider.mockResolvedValue(false);
    const onChanged = vi.fn();
    render(ProvidersSettings, { onChanged });
    await fireEvent.click(await screen.findByRole("button", { name: "Edit" }));
    await fireEvent.input(screen.getByLabelText("API key"), { target: { value: "sk-new" } });
    await fireEvent.click(screen.getByRole("button", { name: "Save provider" }));
    expect((await screen.findByRole("alert")).textContent).toContain("keeps its stored values");
    expect(screen.getByRole("button", { name: "Save provider" })).toBeTruthy();
    expect(onChanged).not.toHaveBeenCalled();
  });
});
