import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import App from "./App.svelte";
import * as apiModule from "./lib/api";
import { resetApi, type ApiMock } from "./lib/apiMock";
import type { AppInfo } from "./lib/types";

vi.mock("./lib/api", async (importOriginal) =>
  (await import("./lib/apiMock")).mockedApi(importOriginal),
);
vi.mock("./lib/windowEvents", () => ({ onWindowEvent: () => () => {} }));
const api = apiModule as unknown as ApiMock;

/** Answers each command the way an empty installation does, `appInfo` with `answer`. */
function backend(answer: () => Promise<AppInfo>): void {
  api.appInfo.mockImplementation(answer);
  api.listConversations.mockResolvedValue([]);
  api.listProviders.mockResolvedValue([]);
  api.detectLocalProviders.mockResolvedValue([]);
  api.mcpFile.mockResolvedValue({ path: "/m.json", text: "{}", version: null, servers: [], problem: null });
  api.mcpServers.mockResolvedValue({ servers: [], configError: null });
  api.openSettings.mockResolvedValue();
}

const info: AppInfo = {
  version: "9.8.7-test",
  paths: {
    dataDir: "/home/test/.local/share/conduit",
    configDir: "/home/test/.config/conduit",
    settingsFile: "/home/test/.config/conduit/settings.json",
    mcpConfigFile: "/home/test/.config/conduit/mcp_servers.json",
    databaseFile: "/home/test/.local/share/conduit/conduit.db",
    mediaDir: "/home/test/.local/share/conduit/media",
    logDir: "/home/test/.local/share/conduit/logs",
    logFile: "/home/test/.local/share/conduit/logs/conduit.log",
  },
};

afterEach(() => resetApi(api));

describe("App", () => {
  it("shows the version the backend reports", async () => {
    backend(() => Promise.resolve(info));
    render(App);
    expect(await screen.findByLabelText("Conduit version")).toHaveProperty(
      "textContent",
      "9.8.7-test",
    );
    expect(api.appInfo).toHaveBeenCalled();
  });

  it("offers a first-run path when no provider is set up", async () => {
    backend(() => Promise.resolve(info));
    render(App);
    expect(await screen.findByLabelText("First run")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Open Settings" })).toBeTruthy();
  });

  it("renders the frame: sidebar, conversation list, chat and composer", async () => {
    backend(() => Promise.resolve(info));
    render(App);
    expect(screen.getByRole("navigation", { name: "Sidebar" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "New chat" })).toBeTruthy();
    expect(screen.getByRole("list", { name: "Conversation list" })).toBeTruthy();
    expect(screen.getByRole("region", { name: "Chat" })).toBeTruthy();
    expect(screen.getByRole("textbox", { name: "Message" })).toBeTruthy();
  });

  it("asks for the newest 500 conversations, and offers older ones when the list came back full", async () => {
    backend(() => Promise.resolve(info));
    render(App);
    await vi.waitFor(() => expect(api.listConversations).toHaveBeenCalledWith(500));
    // An empty list: nothing older to offer.
    expect(screen.queryByRole("button", { name: "Show older conversations" })).toBeNull();
  });

  it("opens settings in their own window: the chat window only asks for it", async () => {
    backend(() => Promise.resolve(info));
    render(App);
    await screen.findByText("9.8.7-test");
    await fireEvent.click(screen.getByRole("button", { name: "Settings" }));
    expect(api.openSettings).toHaveBeenCalled();
    expect(screen.queryByRole("tab", { name: "General" })).toBeNull();
    expect(screen.getByRole("region", { name: "Chat" })).toBeTruthy();
    // Ctrl+, too, as in other desktop apps.
    api.openSettings.mockClear();
    await fireEvent.keyDown(window, { key: ",", ctrlKey: true });
    expect(api.openSettings).toHaveBeenCalledTimes(1);
    await fireEvent.keyDown(window, { key: "," });
    expect(api.openSettings).toHaveBeenCalledTimes(1);
  });

  it("the settings window shows settings with the paths from the backend, and no chat", async () => {
    window.history.replaceState({}, "", "/?window=settings");
    try {
      backend(() => Promise.resolve(info));
      render(App);
      await fireEvent.click(await screen.findByRole("tab", { name: "General" }));
      expect((await screen.findByLabelText("mcpServers file")).textContent).toBe(info.paths.mcpConfigFile);
      expect(screen.getByLabelText("Data folder").textContent).toBe(info.paths.dataDir);
      expect(screen.queryByRole("region", { name: "Chat" })).toBeNull();
      expect(api.listConversations).not.toHaveBeenCalled();
    } finally {
      window.history.replaceState({}, "", "/");
    }
  });

  it("says so when the backend does not answer", async () => {
    backend(() => Promise.reject("command app_info not allowed"));
    render(App);
    // Among the alerts: the history's damage notice says its own ask failed too.
    await waitFor(() =>
      expect(screen.getAllByRole("alert").map((alert) => alert.textContent).join("\n")).toContain(
        "Conduit's engine did not answer: command app_info not allowed",
      ),
    );
  });
});
