import { fireEvent, render, screen } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import ConduitServer from "./ConduitServer.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// The host's window events are not pulled here: no host answers.
vi.mock("../lib/windowEvents", () => ({ onWindowEvent: () => () => {} }));
const api = apiModule as unknown as ApiMock;

afterEach(() => resetApi(api));

describe("Conduit as an MCP server", () => {
  it("lists its own tools with their switches and shows each app's config", async () => {
    api.mcpServeSnippets.mockResolvedValue({
      command: "/opt/conduit",
      args: ["mcp", "serve"],
      claudeDesktop: '{"mcpServers": "claude"}',
      cursor: '{"mcpServers": "cursor"}',
      vsCode: '{"servers": "vscode"}',
    });
    api.mcpServerTools.mockResolvedValue({
      policy: "ask",
      sampling: "ask",
      tools: [
        { name: "render_chart", title: "Render a chart", description: "Draws", readOnly: false, destructive: false, inputSchema: {}, enabled: true, policy: "ask", shown: "t" },
      ],
      shown: "all",
    });
    api.mcpHttpStatus.mockResolvedValue({ enabled: false, address: "127.0.0.1:8765", url: null, error: null, token: "••••••••" });
    api.setMcpHttp.mockResolvedValue({ enabled: true, address: "127.0.0.1:8765", url: "http://127.0.0.1:8765/mcp", error: null, token: "••••••••" });
    render(ConduitServer);
    expect(await screen.findByText('{"mcpServers": "claude"}')).toBeTruthy();
    await fireEvent.click(await screen.findByRole("switch", { name: "Serve over HTTP" }));
    expect(api.setMcpHttp).toHaveBeenCalledWith(true, "127.0.0.1:8765");
    expect(await screen.findByText("http://127.0.0.1:8765/mcp")).toBeTruthy();
    expect(api.mcpServerTools).toHaveBeenCalledWith("conduit");
    expect((await screen.findAllByText(/render_chart/)).length).toBeGreaterThan(0);
    await fireEvent.click(screen.getByRole("tab", { name: "VS Code" }));
    expect(screen.getByLabelText("Config snippet").textContent).toBe('{"servers": "vscode"}');
  });
});

describe("serving over HTTP", () => {
  it("puts the switch back when the host refuses", async () => {
    api.mcpServeSnippets.mockResolvedValue({ command: "c", args: [], claudeDesktop: "{}", cursor: "{}", vsCode: "{}" });
    api.mcpServerTools.mockResolvedValue({ policy: "ask", sampling: "ask", tools: [], shown: "none" });
    api.mcpHttpStatus.mockResolvedValue({ enabled: false, address: "127.0.0.1:8765", url: null, error: null, token: "••••" });
    api.setMcpHttp.mockRejectedValue({ message: "nothing was changed: serving was not confirmed" });
    render(ConduitServer);
    const toggle = (await screen.findByRole("switch", { name: "Serve over HTTP" })) as HTMLInputElement;
    await fireEvent.click(toggle);
    expect((await screen.findByRole("alert")).textContent).toContain("not confirmed");
    expect(toggle.checked).toBe(false);
  });
});
