import { fireEvent, render, screen, waitFor, within } from "@testing-library/svelte";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { commandError } from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import McpSettings from "./McpSettings.svelte";
import type {
  ImportCandidate,
  ImportPick,
  Edit,
  McpFile,
  McpFileServer,
  McpOverview,
  TextProblem,
  ToolSetting,
} from "../lib/types";

const events = vi.hoisted(() => ({ handlers: [] as Array<() => void> }));
vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
vi.mock("../lib/windowEvents", () => ({
  onWindowEvent: (notice: string, handler: () => void) => {
    if (notice === "mcpServers") events.handlers.push(handler);
    return () => {};
  },
}));
const api = apiModule as unknown as ApiMock;

function server(name: string, entry: Record<string, unknown>, extra: Partial<McpFileServer> = {}): McpFileServer {
  // The host names the transport; this fake only sees plain stdio and "http" entries.
  const transport = "command" in entry ? "stdio" : "url" in entry ? "http" : null;
  return { name, disabled: entry.disabled === true, entry, transport, problem: null, ...extra };
}

function fileOf(servers: McpFileServer[], version: string): McpFile {
  const document = { mcpServers: Object.fromEntries(servers.map((s) => [s.name, s.entry])) };
  return {
    path: "/home/test/.config/conduit/mcp_servers.json",
    text: `${JSON.stringify(document, null, 2)}\n`,
    version,
    servers,
    problem: null,
  };
}

/** A backend that keeps one mcpServers file and refuses edits based on an old version. */
class Backend {
  file: McpFile;
  overview: McpOverview = { servers: [], configError: null };
  candidates: ImportCandidate[] = [];
  tools: ToolSetting[] = [];
  problem: TextProblem | null = null;
  private count = 1;

  constructor(servers: McpFileServer[]) {
    this.file = fileOf(servers, "v1");
  }

  /** Changes the file "on disk", as another program would. */
  replaceOnDisk(servers: McpFileServer[]): void {
    this.count += 1;
    this.file = fileOf(servers, `v${this.count}`);
  }

  edit(version: string | null, edit: Edit): McpFile {
    if (version !== this.file.version) {
      throw `${this.file.path} changed on disk since it was read; nothing was written. Read it again and redo the change.`;
    }
    let servers = [...this.file.servers];
    switch (edit.kind) {
      case "add":
        if (servers.some((s) => s.name === edit.name)) throw `a server named "${edit.name}" exists already`;
        servers.push(server(edit.name, edit.entry));
        break;
      case "update":
        servers = servers.map((s) => (s.name === edit.name ? server(edit.name, edit.entry) : s));
        break;
      case "remove":
        servers = servers.filter((s) => s.name !== edit.name);
        break;
      case "set_disabled":
        servers = servers.map((s) => (s.name === edit.name ? { ...s, disabled: edit.disabled } : s));
        break;
      case "replace":
        this.count += 1;
        this.file = { ...this.file, text: edit.text, version: `v${this.count}` };
        return this.file;
    }
    this.replaceOnDisk(servers);
    return this.file;
  }

  importPicks(version: string | null, picks: ImportPick[]): McpFile {
    let file = this.file;
    let base = version;
    for (const pick of picks) {
      const candidate = this.candidates.find((c) => c.name === pick.name);
      if (!candidate) throw `no server ${pick.name}`;
      file = this.edit(base, { kind: "add", name: pick.target, entry: candidate.entry });
      base = file.version;
    }
    return file;
  }

  /** Answers each command the MCP page may call; any other command refuses (resetApi). */
  install(api: ApiMock): void {
    api.mcpFile.mockImplementation(() => answer(() => this.file));
    api.mcpServers.mockImplementation(() => answer(() => this.overview));
    api.editMcpFile.mockImplementation((version, edit) => answer(() => this.edit(version, edit)));
    api.checkMcpText.mockImplementation(() => answer(() => this.problem));
    api.mcpImportFiles.mockResolvedValue([
      { id: "cursor", app: "Cursor", path: "/home/test/.cursor/mcp.json", exists: true },
      { id: "vscode", app: "VS Code", path: "/home/test/.config/Code/User/mcp.json", exists: false },
    ]);
    api.mcpImportCandidates.mockImplementation(() => answer(() => this.candidates));
    api.importMcpServers.mockImplementation((version, _source, picks) =>
      answer(() => this.importPicks(version, picks)),
    );
    api.revealMcpFile.mockImplementation(() =>
      answer(() => ({ ...this.file, text: this.file.text.replaceAll("••••••••", "s3cret") })),
    );
    api.mcpServerTools.mockImplementation(() =>
      answer(() => ({ policy: "ask", sampling: "ask", tools: this.tools, shown: "all-as-listed" })),
    );
    api.restartMcpServer.mockResolvedValue();
    api.setToolEnabled.mockResolvedValue();
    api.setToolPolicy.mockResolvedValue();
    api.setServerPolicy.mockResolvedValue();
    api.setSamplingPolicy.mockResolvedValue();
  }
}

/** What `compute` gives as a resolved promise, or what it throws as a rejected one (as invoke does). */
function answer<T>(compute: () => T): Promise<T> {
  try {
    return Promise.resolve(compute());
  } catch (e) {
    return Promise.reject(e);
  }
}

function setup(servers: McpFileServer[]): Backend {
  const backend = new Backend(servers);
  backend.install(api);
  return backend;
}

async function serverRow(name: string): Promise<HTMLElement> {
  return screen.findByRole("listitem", { name: `Server ${name}` });
}

function editCalls(): Edit[] {
  return api.editMcpFile.mock.calls.map(([, edit]) => edit);
}

function fireDiskEvent(): void {
  for (const handler of events.handlers) handler();
}

beforeEach(() => {
  events.handlers = [];
});

afterEach(() => resetApi(api));

describe("McpSettings", () => {
  it("lists the file's servers with their live states and a failed server's reason and log", async () => {
    const backend = setup([
      server("files", { command: "npx" }),
      server("broken", { command: "srv" }),
      server("new", { command: "srv" }),
      server("off", { command: "srv", disabled: true }),
      server("bad", { args: ["x"] }, { problem: "the entry needs a command (stdio) or a url (http)" }),
    ]);
    backend.overview = {
      configError: null,
      servers: [
        { name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-06-18", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 3 },
        { name: "broken", state: "failed", reason: "exited with code 1", exit_code: 1, stderr_tail: ["boom", "bye"] },
        { name: "off", state: "disabled" },
      ],
    };
    render(McpSettings);

    const files = await serverRow("files");
    await waitFor(() => expect(within(files).getByLabelText("Server state").textContent).toBe("Ready"));
    expect(within(files).getByText("3 tools")).toBeTruthy();

    const broken = await serverRow("broken");
    expect(within(broken).getByLabelText("Server state").textContent).toBe("Failed");
    expect(within(broken).getByText("exited with code 1")).toBeTruthy();
    expect(within(broken).getByText("Server log")).toBeTruthy();
    expect(broken.querySelector("pre")?.textContent).toBe("boom\nbye");

    expect(within(await serverRow("new")).getByLabelText("Server state").textContent).toBe("Starting");
    expect(within(await serverRow("off")).getByLabelText("Server state").textContent).toBe("Disabled");
    const bad = await serverRow("bad");
    expect(within(bad).getByLabelText("Server state").textContent).toBe("Failed");
    expect(within(bad).getByText(/needs a command/)).toBeTruthy();

    const names = within(screen.getByRole("list", { name: "MCP server list" }))
      .getAllByRole("listitem")
      .map((item) => item.getAttribute("aria-label"));
    expect(names).toEqual(["Server files", "Server broken", "Server new", "Server off", "Server bad"]);
  });

  it("shows what a server wrote to stderr and sent as log messages, hidden characters marked", async () => {
    const backend = setup([server("files", { command: "npx" }), server("quiet", { command: "srv" })]);
    backend.overview = {
      configError: null,
      servers: [
        { name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-11-25", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 3 },
      ],
    };
    api.mcpServerOutput.mockImplementation((name) =>
      Promise.resolve(
        name === "files"
          ? { stderr: ["files: listening", "evil\u202Eline"], logMessages: ["info: indexed 3 folders"] }
          : { stderr: [], logMessages: [] },
      ),
    );
    render(McpSettings);
    const files = await serverRow("files");
    await fireEvent.click(within(files).getByRole("button", { name: "Output" }));
    const stderr = await within(files).findByLabelText("Standard error");
    expect(stderr.textContent).toContain("files: listening");
    expect(stderr.textContent).not.toContain("\u202E");
    expect(within(files).getByLabelText("Log messages").textContent).toBe("info: indexed 3 folders");
    expect(api.mcpServerOutput).toHaveBeenCalledWith("files");

    const quiet = await serverRow("quiet");
    await fireEvent.click(within(quiet).getByRole("button", { name: "Output" }));
    expect(await within(quiet).findByText(/Nothing yet/)).toBeTruthy();
    api.mcpServerOutput.mockResolvedValueOnce({ stderr: ["late line"], logMessages: [] });
    await fireEvent.click(within(quiet).getByRole("button", { name: "Refresh" }));
    expect((await within(quiet).findByLabelText("Standard error")).textContent).toBe("late line");
  });

  it("adds a stdio server from the form, based on the loaded version", async () => {
    setup([]);
    render(McpSettings);
    await fireEvent.click(await screen.findByRole("button", { name: "Add server" }));
    const form = screen.getByRole("form", { name: "Server form" });
    await fireEvent.input(within(form).getByLabelText("Server name"), { target: { value: "time" } });
    await fireEvent.input(within(form).getByLabelText("Command"), { target: { value: "uvx" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Add argument" }));
    await fireEvent.click(within(form).getByRole("button", { name: "Add argument" }));
    await fireEvent.input(within(form).getByLabelText("Argument 1"), { target: { value: "mcp-server-time" } });
    await fireEvent.input(within(form).getByLabelText("Argument 2"), { target: { value: "--local" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Add variable" }));
    await fireEvent.input(within(form).getByLabelText("Variable name 1"), { target: { value: "TZ" } });
    const value = within(form).getByLabelText("Variable value 1") as HTMLInputElement;
    expect(value.type).toBe("password");
    await fireEvent.input(value, { target: { value: "UTC" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Show variable value 1" }));
    expect(value.type).toBe("text");
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));

    await waitFor(() =>
      expect(api.editMcpFile).toHaveBeenCalledWith("v1", {
        kind: "add",
        name: "time",
        entry: { command: "uvx", args: ["mcp-server-time", "--local"], env: { TZ: "UTC" } },
      }),
    );
    await serverRow("time");
    expect(screen.queryByRole("form", { name: "Server form" })).toBeNull();
  });

  it("adds a well-known server from the catalog: the form is filled in, said what to change, and saved as shown", async () => {
    setup([server("filesystem", { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv"] })]);
    render(McpSettings);
    const catalog = await screen.findByRole("list", { name: "Well-known servers" });
    const filesystem = within(catalog).getByRole("button", { name: "Add Filesystem" }).closest("li");
    expect(filesystem?.textContent).toContain("In your file");
    expect(filesystem?.textContent).toContain("Needs Node.js (npx).");
    await fireEvent.click(within(catalog).getByRole("button", { name: "Add Filesystem" }));
    const form = screen.getByRole("form", { name: "Server form" });
    expect(within(form).getByRole("heading").textContent).toBe("Add Filesystem");
    expect(form.querySelector("[data-fill-in]")?.textContent).toContain("Change ~/Documents to the folders it may use");
    expect((within(form).getByLabelText("Server name") as HTMLInputElement).value).toBe("filesystem-2");
    expect((within(form).getByLabelText("Command") as HTMLInputElement).value).toBe("npx");
    // One form at a time: the catalog waits while it is open.
    expect(within(catalog).getByRole("button", { name: "Add Memory" })).toHaveProperty("disabled", true);
    await fireEvent.input(within(form).getByLabelText("Argument 3"), { target: { value: "~/Projects" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));

    await waitFor(() =>
      expect(api.editMcpFile).toHaveBeenCalledWith("v1", {
        kind: "add",
        name: "filesystem-2",
        entry: { command: "npx", args: ["-y", "@modelcontextprotocol/server-filesystem", "~/Projects"] },
      }),
    );
    await serverRow("filesystem-2");
    expect(screen.queryByRole("form", { name: "Server form" })).toBeNull();

    // A remote one fills in its address and header.
    await fireEvent.click(within(catalog).getByRole("button", { name: "Add GitHub" }));
    const remote = screen.getByRole("form", { name: "Server form" });
    expect((within(remote).getByLabelText("Transport") as HTMLSelectElement).value).toBe("http");
    expect((within(remote).getByLabelText("URL") as HTMLInputElement).value).toBe("https://api.githubcopilot.com/mcp/");
    expect((within(remote).getByLabelText("Header name 1") as HTMLInputElement).value).toBe("Authorization");
    expect((within(remote).getByLabelText("Header value 1") as HTMLInputElement).value).toBe("Bearer ${GITHUB_PERSONAL_ACCESS_TOKEN}");
    await fireEvent.click(within(remote).getByRole("button", { name: "Cancel" }));
    expect(api.editMcpFile).toHaveBeenCalledTimes(1);

    // Git names a repository that is not there: the form does not save it unchanged.
    await fireEvent.click(within(catalog).getByRole("button", { name: "Add Git" }));
    const git = screen.getByRole("form", { name: "Server form" });
    await fireEvent.click(within(git).getByRole("button", { name: "Save" }));
    expect(within(git).getByRole("alert").textContent).toContain("Change /path/to/repository");
    expect(api.editMcpFile).toHaveBeenCalledTimes(1);
    await fireEvent.input(within(git).getByLabelText("Argument 3"), { target: { value: "/home/ada/app" } });
    await fireEvent.click(within(git).getByRole("button", { name: "Save" }));
    await waitFor(() =>
      expect(api.editMcpFile).toHaveBeenLastCalledWith("v2", {
        kind: "add",
        name: "git",
        entry: { command: "uvx", args: ["mcp-server-git", "--repository", "/home/ada/app"] },
      }),
    );
  });

  it("keeps the form and what was typed when the backend refuses the server", async () => {
    setup([server("time", { command: "uvx" })]);
    render(McpSettings);
    await fireEvent.click(await screen.findByRole("button", { name: "Add server" }));
    const form = screen.getByRole("form", { name: "Server form" });
    await fireEvent.input(within(form).getByLabelText("Server name"), { target: { value: "time" } });
    await fireEvent.input(within(form).getByLabelText("Command"), { target: { value: "other" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    expect((await within(form).findByRole("alert")).textContent).toContain("exists already");
    expect((within(form).getByLabelText("Command") as HTMLInputElement).value).toBe("other");
  });

  it("edits a server and keeps the entry's unknown fields", async () => {
    setup([
      server("files", {
        command: "npx",
        args: ["-y", "server-files"],
        env: { DEBUG: "1" },
        someFutureField: { keep: true },
        timeout: 30,
      }),
    ]);
    render(McpSettings);
    await fireEvent.click(within(await serverRow("files")).getByRole("button", { name: "Edit" }));
    const form = screen.getByRole("form", { name: "Server form" });
    const name = within(form).getByLabelText("Server name") as HTMLInputElement;
    expect(name.value).toBe("files");
    expect(name.readOnly).toBe(true);
    expect((within(form).getByLabelText("Argument 2") as HTMLInputElement).value).toBe("server-files");
    await fireEvent.input(within(form).getByLabelText("Command"), { target: { value: "bunx" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));

    await waitFor(() => expect(editCalls()).toHaveLength(1));
    expect(editCalls()[0]).toEqual({
      kind: "update",
      name: "files",
      entry: {
        command: "bunx",
        args: ["-y", "server-files"],
        env: { DEBUG: "1" },
        someFutureField: { keep: true },
        timeout: 30,
      },
    });
  });

  it("saves a changed env value and writes every other field of the entry as it was", async () => {
    const entry = {
      type: "stdio",
      command: "  npx ",
      args: ["--prefix", "", "server-files"],
      env: { DEBUG: "1", TOKEN: "${TOKEN}" },
      cwd: " /srv/app ",
      roots: [],
      someFutureField: { keep: true },
    };
    setup([server("files", entry)]);
    render(McpSettings);
    await fireEvent.click(within(await serverRow("files")).getByRole("button", { name: "Edit" }));
    const form = screen.getByRole("form", { name: "Server form" });
    expect((within(form).getByLabelText("Argument 2") as HTMLInputElement).value).toBe("");
    // A blank row the user adds and leaves is not an argument; the file's blank one is.
    await fireEvent.click(within(form).getByRole("button", { name: "Add argument" }));
    await fireEvent.click(within(form).getByRole("button", { name: "Add root" }));
    await fireEvent.input(within(form).getByLabelText("Variable value 1"), { target: { value: "0" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));

    await waitFor(() => expect(editCalls()).toHaveLength(1));
    const saved = editCalls()[0];
    expect(JSON.stringify(saved)).toBe(
      JSON.stringify({ kind: "update", name: "files", entry: { ...entry, env: { DEBUG: "0", TOKEN: "${TOKEN}" } } }),
    );
  });

  it("switches an HTTP server's entry without stdio fields", async () => {
    setup([server("tool", { command: "srv", args: ["a"], note: "mine" })]);
    render(McpSettings);
    await fireEvent.click(within(await serverRow("tool")).getByRole("button", { name: "Edit" }));
    const form = screen.getByRole("form", { name: "Server form" });
    await fireEvent.change(within(form).getByLabelText("Transport"), { target: { value: "http" } });
    await fireEvent.input(within(form).getByLabelText("URL"), { target: { value: "https://mcp.example.com/mcp" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Add header" }));
    await fireEvent.input(within(form).getByLabelText("Header name 1"), { target: { value: "Authorization" } });
    await fireEvent.input(within(form).getByLabelText("Header value 1"), { target: { value: "Bearer ${TOKEN}" } });
    await fireEvent.click(within(form).getByRole("button", { name: "Save" }));
    await waitFor(() => expect(editCalls()).toHaveLength(1));
    expect(editCalls()[0]).toEqual({
      kind: "update",
      name: "tool",
      entry: {
        note: "mine",
        type: "http",
        url: "https://mcp.example.com/mcp",
        headers: { Authorization: "Bearer ${TOKEN}" },
      },
    });
  });

  it("shows where the raw text is wrong and keeps Save disabled", async () => {
    const backend = setup([]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    expect(editor.getAttribute("spellcheck")).toBe("false");
    backend.problem = { message: "expected `,` or `}`", line: 2, column: 5 };
    await fireEvent.input(editor, { target: { value: '{\n  "mcpServers" {}\n}' } });
    const problem = await screen.findByRole("alert", { name: "JSON problem" });
    expect(problem.textContent).toBe("Line 2, column 5: expected `,` or `}`");
    expect(api.checkMcpText).toHaveBeenCalledWith('{\n  "mcpServers" {}\n}');
    expect((screen.getByRole("button", { name: "Save file" }) as HTMLButtonElement).disabled).toBe(true);
  });

  it("saves the raw text with the version it was loaded from", async () => {
    setup([]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    const save = screen.getByRole("button", { name: "Save file" }) as HTMLButtonElement;
    expect(save.disabled).toBe(true);
    const text = '{ "mcpServers": { "x": { "command": "x" } } }\n';
    await fireEvent.input(editor, { target: { value: text } });
    expect(save.disabled).toBe(false);
    await fireEvent.click(save);
    await waitFor(() => expect(editCalls()).toEqual([{ kind: "replace", text }]));
    expect(api.editMcpFile).toHaveBeenCalledWith("v1", { kind: "replace", text });
    await waitFor(() => expect(save.disabled).toBe(true));
  });

  it("keeps unsaved raw text when the file changes on disk and lets the user choose", async () => {
    const backend = setup([server("a", { command: "a" })]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    const mine = '{ "mcpServers": { "mine": { "command": "m" } } }';
    await fireEvent.input(editor, { target: { value: mine } });

    backend.replaceOnDisk([server("a", { command: "a" }), server("b", { command: "b" })]);
    fireDiskEvent();
    const notice = await screen.findByRole("status", { name: "File changed on disk" });
    expect(editor.value).toBe(mine);
    // The list shows the newest file all the same.
    await serverRow("b");

    await fireEvent.click(within(notice).getByRole("button", { name: "Keep my text" }));
    expect(screen.queryByRole("status", { name: "File changed on disk" })).toBeNull();
    await fireEvent.click(screen.getByRole("button", { name: "Save file" }));
    await waitFor(() =>
      expect(api.editMcpFile).toHaveBeenCalledWith("v2", { kind: "replace", text: mine }),
    );
  });

  it("loads the file from disk when the user discards their text", async () => {
    const backend = setup([server("a", { command: "a" })]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    await fireEvent.input(editor, { target: { value: "{}" } });
    backend.replaceOnDisk([server("b", { command: "b" })]);
    fireDiskEvent();
    const notice = await screen.findByRole("status", { name: "File changed on disk" });
    await fireEvent.click(within(notice).getByRole("button", { name: "Load the file from disk" }));
    expect(editor.value).toBe(backend.file.text);
  });

  it("replaces untouched raw text silently when the file changes on disk", async () => {
    const backend = setup([server("a", { command: "a" })]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    await waitFor(() => expect(editor.value).toBe(backend.file.text));
    backend.replaceOnDisk([server("b", { command: "b" })]);
    fireDiskEvent();
    await waitFor(() => expect(editor.value).toBe(backend.file.text));
    expect(editor.value).toContain('"b"');
    expect(screen.queryByRole("status", { name: "File changed on disk" })).toBeNull();
  });

  it("keeps the raw text and says so when a save is refused as a conflict", async () => {
    const backend = setup([server("a", { command: "a" })]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    await fireEvent.input(editor, { target: { value: "{}" } });
    // Changed on disk, but no event has told the window yet.
    backend.replaceOnDisk([server("b", { command: "b" })]);
    await fireEvent.click(screen.getByRole("button", { name: "Save file" }));
    expect((await screen.findByText(/changed on disk since it was read/)).getAttribute("role")).toBe("alert");
    expect(editor.value).toBe("{}");
    await screen.findByRole("status", { name: "File changed on disk" });
  });

  it("previews an import, marks a clashing name and imports under the new name", async () => {
    const backend = setup([server("files", { command: "npx" })]);
    backend.candidates = [
      { name: "files", entry: { command: "other" }, problem: null },
      { name: "time", entry: { command: "uvx", args: ["mcp-server-time"] }, problem: null },
      { name: "bad", entry: { args: [] }, problem: "the entry needs a command (stdio) or a url (http)" },
    ];
    render(McpSettings);
    await serverRow("files");
    // Only files the host knows (or one picked natively) can be named; missing ones are not offered.
    await fireEvent.click(await screen.findByRole("button", { name: "Cursor" }));
    expect(screen.queryByRole("button", { name: "VS Code" })).toBeNull();
    expect(api.mcpImportCandidates).toHaveBeenCalledWith({ kind: "known", id: "cursor" });

    const clashing = (await screen.findByLabelText("Import files")) as HTMLInputElement;
    expect(clashing.checked).toBe(false);
    const rename = screen.getByLabelText("New name for files") as HTMLInputElement;
    expect(rename.value).toBe("files-imported");
    expect((screen.getByLabelText("Import time") as HTMLInputElement).checked).toBe(true);
    const bad = screen.getByLabelText("Import bad") as HTMLInputElement;
    expect(bad.checked).toBe(false);
    expect(bad.disabled).toBe(true);
    expect(screen.getByText(/needs a command/)).toBeTruthy();

    await fireEvent.input(rename, { target: { value: "files" } });
    expect(clashing.disabled).toBe(true);
    expect(screen.getByText("A server named files exists already.")).toBeTruthy();
    await fireEvent.input(rename, { target: { value: "files-cursor" } });
    expect(clashing.disabled).toBe(false);
    await fireEvent.click(clashing);
    await fireEvent.click(screen.getByRole("button", { name: "Import selected" }));

    expect((await screen.findByText("Imported 2 servers.")).getAttribute("role")).toBe("status");
    // One request: the host reads the file again and asks the user natively before writing.
    expect(api.importMcpServers).toHaveBeenCalledWith("v1", { kind: "known", id: "cursor" }, [
      { name: "files", target: "files-cursor" },
      { name: "time", target: "time" },
    ]);
    await serverRow("files-cursor");
    await serverRow("time");
  });

  it("shows secret values masked until the user reveals them through the host", async () => {
    setup([server("gh", { command: "gh-mcp", env: { TOKEN: "••••••••" } })]);
    render(McpSettings);
    const editor = (await screen.findByLabelText("mcpServers JSON")) as HTMLTextAreaElement;
    await waitFor(() => expect(editor.value).toContain("••••••••"));
    await fireEvent.click(screen.getByRole("button", { name: "Reveal secret values" }));
    await waitFor(() => expect(editor.value).toContain("s3cret"));
    expect(api.revealMcpFile).toHaveBeenCalledWith();
  });

  it("sends set_disabled when the enable switch is toggled", async () => {
    setup([server("files", { command: "npx" })]);
    render(McpSettings);
    const toggle = within(await serverRow("files")).getByRole("switch", { name: "Enabled files" }) as HTMLInputElement;
    expect(toggle.checked).toBe(true);
    await fireEvent.click(toggle);
    await waitFor(() =>
      expect(api.editMcpFile).toHaveBeenCalledWith("v1", { kind: "set_disabled", name: "files", disabled: true }),
    );
    await waitFor(() =>
      expect(within(screen.getByRole("listitem", { name: "Server files" })).getByLabelText("Server state").textContent).toBe(
        "Disabled",
      ),
    );
  });

  it("asks the host to delete a server, which confirms it natively", async () => {
    setup([server("files", { command: "npx" }), server("time", { command: "uvx" })]);
    render(McpSettings);
    // The user says no in the host's dialog: the server stays and the page says so.
    api.editMcpFile.mockImplementationOnce(() => Promise.reject("nothing was changed: the change was not confirmed"));
    await fireEvent.click(within(await serverRow("files")).getByRole("button", { name: "Delete" }));
    await waitFor(() => expect(screen.getByText(/the change was not confirmed/)).toBeTruthy());
    expect(screen.getByRole("listitem", { name: "Server files" })).toBeTruthy();
    // A yes: gone. The page raises no dialog of its own (the host's is the one that counts).
    await fireEvent.click(within(await serverRow("files")).getByRole("button", { name: "Delete" }));
    expect(screen.queryByRole("alertdialog")).toBeNull();
    await waitFor(() => expect(screen.queryByRole("listitem", { name: "Server files" })).toBeNull());
    expect(editCalls()).toEqual([
      { kind: "remove", name: "files" },
      { kind: "remove", name: "files" },
    ]);
    expect(screen.getByRole("listitem", { name: "Server time" })).toBeTruthy();
  });

  it("lists a ready server's tools and changes their settings", async () => {
    const backend = setup([server("files", { command: "npx" })]);
    backend.overview = { configError: null, servers: [{ name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-06-18", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 1 }] };
    backend.tools = [
      {
        name: "delete_file",
        title: "Delete a file",
        description: "Removes a file",
        readOnly: false,
        destructive: true,
        inputSchema: { type: "object" },
        enabled: true,
        policy: "ask",
        shown: "delete-as-listed",
      },
    ];
    render(McpSettings);
    const row = await serverRow("files");
    await waitFor(() => expect(within(row).getByLabelText("Server state").textContent).toBe("Ready"));
    await fireEvent.click(within(row).getByRole("button", { name: "Tools" }));
    const tool = await within(row).findByRole("row", { name: "Tool delete_file" });
    expect(within(tool).getByText("destructive")).toBeTruthy();
    await fireEvent.click(within(tool).getByLabelText("Offer delete_file to models"));
    expect(api.setToolEnabled).toHaveBeenCalledWith("files", "delete_file", false);
    await fireEvent.change(within(tool).getByLabelText("Approval for delete_file"), { target: { value: "allow" } });
    // The allow names what was shown, so the host saves it only for that.
    expect(api.setToolPolicy).toHaveBeenCalledWith("files", "delete_file", "allow", "delete-as-listed");
  });

  it("an allow refused because the tool changed since it was listed shows it again as it is", async () => {
    const backend = setup([server("files", { command: "npx" })]);
    backend.overview = { configError: null, servers: [{ name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-06-18", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 1 }] };
    const listed = {
      name: "send",
      title: null,
      description: "Sends a note",
      readOnly: false,
      destructive: false,
      inputSchema: { type: "object" },
      enabled: true,
      policy: "ask" as const,
      shown: "v1",
    };
    backend.tools = [listed];
    render(McpSettings);
    const row = await serverRow("files");
    await waitFor(() => expect(within(row).getByLabelText("Server state").textContent).toBe("Ready"));
    await fireEvent.click(within(row).getByRole("button", { name: "Tools" }));
    const tool = await within(row).findByRole("row", { name: "Tool send" });
    // The server changed the tool between the list and the click.
    backend.tools = [{ ...listed, description: "Sends a note and your files", shown: "v2" }];
    api.setToolPolicy.mockRejectedValueOnce(
      commandError({ message: 'the tool "send" of "files" changed since Settings showed it', action: null }),
    );
    await fireEvent.change(within(tool).getByLabelText("Approval for send"), { target: { value: "allow" } });
    expect(api.setToolPolicy).toHaveBeenCalledWith("files", "send", "allow", "v1");
    await within(row).findByText(/changed since Settings showed it/);
    await within(row).findByText("Sends a note and your files");
    const select = within(row).getByLabelText("Approval for send") as HTMLSelectElement;
    expect(select.value).toBe("ask");
  });

  it("keeps an open form: no Edit replaces it until it is saved or cancelled", async () => {
    setup([server("files", { command: "npx" }), server("time", { command: "uvx" })]);
    render(McpSettings);
    await fireEvent.click(within(await serverRow("files")).getByRole("button", { name: "Edit" }));
    const form = screen.getByRole("form", { name: "Server form" });
    await fireEvent.input(within(form).getByLabelText("Command"), { target: { value: "bunx-typed" } });
    for (const name of ["files", "time"]) {
      const edit = within(await serverRow(name)).getByRole("button", { name: "Edit" }) as HTMLButtonElement;
      expect(edit.disabled).toBe(true);
    }
    expect((within(form).getByLabelText("Command") as HTMLInputElement).value).toBe("bunx-typed");
    await fireEvent.click(within(form).getByRole("button", { name: "Cancel" }));
    const edit = within(await serverRow("time")).getByRole("button", { name: "Edit" }) as HTMLButtonElement;
    expect(edit.disabled).toBe(false);
  });

  it("shows the server-wide approval in force again when a change of it is refused", async () => {
    const backend = setup([server("files", { command: "npx" })]);
    backend.overview = { configError: null, servers: [{ name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-06-18", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 1 }] };
    backend.tools = [
      { name: "send", title: null, description: "Sends a note", readOnly: false, destructive: false, inputSchema: { type: "object" }, enabled: true, policy: "ask", shown: "v1" },
    ];
    render(McpSettings);
    const row = await serverRow("files");
    await waitFor(() => expect(within(row).getByLabelText("Server state").textContent).toBe("Ready"));
    await fireEvent.click(within(row).getByRole("button", { name: "Tools" }));
    const all = (await within(row).findByLabelText("Approval for all tools of files")) as HTMLSelectElement;
    expect(all.value).toBe("ask");
    // The user cancels the native question: the host refuses, and the policy stays "ask".
    api.setServerPolicy.mockRejectedValueOnce({ message: "the change was not confirmed" });
    await fireEvent.change(all, { target: { value: "allow" } });
    expect(api.setServerPolicy).toHaveBeenCalledWith("files", "allow", "all-as-listed");
    expect((await within(row).findByRole("alert")).textContent).toContain("not confirmed");
    await waitFor(() => expect(all.value).toBe("ask"));
  });

  it("sets what happens when a server asks to run a model, and goes back when refused", async () => {
    const backend = setup([server("files", { command: "npx" })]);
    backend.overview = { configError: null, servers: [{ name: "files", state: "ready", details: { name: null, version: null, protocolVersion: "2025-11-25", instructions: null, tools: true, resources: false, prompts: false, completions: false }, tool_count: 0 }] };
    render(McpSettings);
    const row = await serverRow("files");
    await fireEvent.click(await within(row).findByRole("button", { name: "Tools" }));
    const sampling = (await within(row).findByLabelText("Sampling by files")) as HTMLSelectElement;
    expect(sampling.value).toBe("ask");
    await fireEvent.change(sampling, { target: { value: "deny" } });
    expect(api.setSamplingPolicy).toHaveBeenCalledWith("files", "deny");
    api.setSamplingPolicy.mockRejectedValueOnce({ message: "settings.json is not valid JSON" });
    await fireEvent.change(sampling, { target: { value: "allow" } });
    expect((await within(row).findByRole("alert")).textContent).toContain("not valid JSON");
    expect(sampling.value).toBe("deny");
  });
});
