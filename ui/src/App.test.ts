import { fireEvent, render, screen } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import App from "./App.svelte";
import type { AppInfo } from "./lib/types";

const invoke = vi.hoisted(() => vi.fn());
vi.mock("@tauri-apps/api/core", () => ({ invoke, Channel: class {} }));
vi.mock("@tauri-apps/api/event", () => ({ listen: () => Promise.resolve(() => {}) }));

/** Answers each command the way an empty installation does, `app_info` with `answer`. */
function backend(answer: () => Promise<unknown>): (command: string) => Promise<unknown> {
  return (command: string) => {
    switch (command) {
      case "app_info":
        return answer();
      case "list_conversations":
      case "list_providers":
      case "detect_local_providers":
        return Promise.resolve([]);
      case "mcp_file":
        return Promise.resolve({ path: "/m.json", text: "{}", version: null, servers: [], problem: null });
      case "mcp_servers":
        return Promise.resolve({ servers: [], configError: null });
      case "open_settings":
        return Promise.resolve(null);
      default:
        return Promise.reject(new Error(`unexpected command ${command}`));
    }
  };
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

afterEach(() => {
  invoke.mockReset();
});

describe("App", () => {
  it("shows the version the backend reports", async () => {
    invoke.mockImplementation(backend(() => Promise.resolve(info)));
    render(App);
    expect(await screen.findByLabelText("Conduit version")).toHaveProperty(
      "textContent",
      "9.8.7-test",
    );
    expect(invoke).toHaveBeenCalledWith("app_info");
  });

  it("offers a first-run path when no provider is set up", async () => {
    invoke.mockImplementation(backend(() => Promise.resolve(info)));
    render(App);
    expect(await screen.findByLabelText("First run")).toBeTruthy();
    expect(screen.getByRole("button", { name: "Open Settings" })).toBeTruthy();
  });

  it("renders the frame: sidebar, conversation list, chat and composer", async () => {
    invoke.mockImplementation(backend(() => Promise.resolve(info)));
    render(App);
    expect(screen.getByRole("navigation", { name: "Sidebar" })).toBeTruthy();
    expect(screen.getByRole("button", { name: "New chat" })).toBeTruthy();
    expect(screen.getByRole("list", { name: "Conversation list" })).toBeTruthy();
    expect(screen.getByRole("region", { name: "Chat" })).toBeTruthy();
    expect(screen.getByRole("textbox", { name: "Message" })).toBeTruthy();
  });

  it("opens settings in their own window: the chat window only asks for it", async () => {
    invoke.mockImplementation(backend(() => Promise.resolve(info)));
    render(App);
    await screen.findByText("9.8.7-test");
    await fireEvent.click(screen.getByRole("button", { name: "Settings" }));
    expect(invoke).toHaveBeenCalledWith("open_settings");
    expect(screen.queryByRole("tab", { name: "General" })).toBeNull();
    expect(screen.getByRole("region", { name: "Chat" })).toBeTruthy();
  });

  it("the settings window shows settings with the paths from the backend, and no chat", async () => {
    window.history.replaceState({}, "", "/?window=settings");
    try {
      invoke.mockImplementation(backend(() => Promise.resolve(info)));
      render(App);
      await fireEvent.click(await screen.findByRole("tab", { name: "General" }));
      expect((await screen.findByLabelText("mcpServers file")).textContent).toBe(info.paths.mcpConfigFile);
      expect(screen.getByLabelText("Data folder").textContent).toBe(info.paths.dataDir);
      expect(screen.queryByRole("region", { name: "Chat" })).toBeNull();
      expect(invoke).not.toHaveBeenCalledWith("list_conversations");
    } finally {
      window.history.replaceState({}, "", "/");
    }
  });

  it("says so when the backend does not answer", async () => {
    invoke.mockImplementation(backend(() => Promise.reject("command app_info not allowed")));
    render(App);
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("command app_info not allowed");
  });
});
