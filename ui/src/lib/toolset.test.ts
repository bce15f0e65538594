// The tools panel's logic without a DOM: a typed fake Api answered by hand.
import { describe, expect, it, vi, type Mock } from "vitest";
import { ToolsetController, distinctChoices, withServer, withTool, type ToolsetApi } from "./toolset.svelte";
import type { ToolChoices, Toolset } from "./types";

type FakeApi = { [Name in keyof ToolsetApi]: Mock<ToolsetApi[Name]> };

function choices(toolset: Toolset): ToolChoices {
  return { toolset, servers: [], offered: 0, tokens: 0, warning: null };
}

function setup() {
  const api: FakeApi = {
    toolChoices: vi.fn((_conversation, toolset) => Promise.resolve(choices(toolset ?? { offServers: [], offTools: [] }))),
    setConversationToolset: vi.fn(() => Promise.resolve()),
    conversationAllows: vi.fn<ToolsetApi["conversationAllows"]>(() => Promise.resolve([])),
    revokeConversationAllow: vi.fn<ToolsetApi["revokeConversationAllow"]>(() => Promise.resolve(true)),
  };
  return { api, panel: new ToolsetController(api) };
}

describe("toolset edits", () => {
  it("switch servers and single tools off and on", () => {
    const none: Toolset = { offServers: [], offTools: [] };
    const noFs = withServer(none, "fs", false);
    expect(noFs).toEqual({ offServers: ["fs"], offTools: [] });
    const oneToolOff = withTool(noFs, "gh", "delete_repo", false);
    expect(oneToolOff.offTools).toEqual([{ server: "gh", tool: "delete_repo" }]);
    expect(withTool(oneToolOff, "gh", "delete_repo", true).offTools).toEqual([]);
    // A server switched on again offers all its tools again.
    const ghOff = withServer(withTool(none, "gh", "x", false), "gh", false);
    expect(withServer(ghOff, "gh", true)).toEqual(none);
  });
});

describe("ToolsetController", () => {
  it("lists the tools allowed in the conversation shown and takes one back", async () => {
    const { api, panel } = setup();
    await panel.show(null);
    await panel.refreshAllowed();
    expect(api.conversationAllows).not.toHaveBeenCalled();
    expect(panel.allowed).toEqual([]);

    await panel.show("c1");
    api.conversationAllows.mockResolvedValueOnce([{ server: "fs", tool: "read_file" }, { server: "gh", tool: "search" }]);
    await panel.refreshAllowed();
    expect(api.conversationAllows).toHaveBeenLastCalledWith("c1");
    expect(panel.allowed).toHaveLength(2);

    api.conversationAllows.mockResolvedValueOnce([{ server: "gh", tool: "search" }]);
    await panel.revoke("fs", "read_file");
    expect(api.revokeConversationAllow).toHaveBeenCalledWith("c1", "fs", "read_file");
    expect(panel.allowed).toEqual([{ server: "gh", tool: "search" }]);

    // Another conversation's list is not this one's, also when its read answers late.
    let answer!: (allowed: { server: string; tool: string }[]) => void;
    api.conversationAllows.mockReturnValueOnce(new Promise((done) => (answer = done)));
    const late = panel.refreshAllowed();
    await panel.show("c2");
    expect(panel.allowed).toEqual([]);
    answer([{ server: "fs", tool: "read_file" }]);
    await late;
    expect(panel.allowed).toEqual([]);

    // A refusal is said, and the list read again.
    await panel.show("c1");
    api.revokeConversationAllow.mockRejectedValueOnce(new Error("no such conversation"));
    await panel.revoke("gh", "search");
    expect(panel.error).toContain("no such conversation");
  });

  it("holds a new chat's choice and hands it to the first message only", async () => {
    const { api, panel } = setup();
    await panel.show(null);
    expect(panel.forNewChat()).toBeNull();
    await panel.setServer("conduit", false);
    expect(api.setConversationToolset).not.toHaveBeenCalled();
    expect(api.toolChoices).toHaveBeenLastCalledWith(null, { offServers: ["conduit"], offTools: [] });
    expect(panel.forNewChat()).toEqual({ offServers: ["conduit"], offTools: [] });
    // The chat got its id: its choice is now the host's, and the draft is not sent again.
    await panel.show("c1");
    expect(panel.forNewChat()).toBeNull();
    expect(api.toolChoices).toHaveBeenLastCalledWith("c1", null);
    // Another new chat starts with every tool.
    await panel.show(null);
    expect(panel.forNewChat()).toBeNull();
  });

  it("keeps a saved conversation's choice with the host", async () => {
    const { api, panel } = setup();
    api.toolChoices.mockResolvedValueOnce(choices({ offServers: ["fs"], offTools: [] }));
    await panel.show("c1");
    await panel.setTool("gh", "delete_repo", false);
    expect(api.setConversationToolset).toHaveBeenCalledWith("c1", {
      offServers: ["fs"],
      offTools: [{ server: "gh", tool: "delete_repo" }],
    });
  });

  it("says why a change could not be kept, and a slow answer does not overwrite a newer one", async () => {
    const { api, panel } = setup();
    await panel.show("c1");
    api.setConversationToolset.mockRejectedValueOnce(new Error("no such conversation"));
    await panel.setServer("fs", false);
    expect(panel.error).toContain("no such conversation");

    let answerOld: (value: ToolChoices) => void = () => {};
    api.toolChoices.mockImplementationOnce(() => new Promise((resolve) => (answerOld = resolve)));
    const slow = panel.show("c1");
    api.toolChoices.mockResolvedValueOnce({ ...choices({ offServers: [], offTools: [] }), offered: 7 });
    await panel.show("c2");
    answerOld({ ...choices({ offServers: [], offTools: [] }), offered: 1 });
    await slow;
    expect(panel.choices?.offered).toBe(7);
  });
});

describe("quick changes", () => {
  it("keep every switch: each change starts from what the one before left", async () => {
    const { api, panel } = setup();
    // The host keeps each conversation's set.
    const kept = new Map<string, Toolset>();
    api.toolChoices.mockImplementation((conversation) =>
      Promise.resolve(choices(kept.get(conversation ?? "") ?? { offServers: [], offTools: [] })),
    );
    api.setConversationToolset.mockImplementation(async (conversation, toolset) => {
      await new Promise((resolve) => setTimeout(resolve, 5));
      kept.set(conversation, toolset);
    });
    await panel.show("c1");
    await Promise.all([panel.setServer("fs", false), panel.setServer("gh", false), panel.setTool("web", "fetch", false)]);
    expect(kept.get("c1")).toEqual({ offServers: ["fs", "gh"], offTools: [{ server: "web", tool: "fetch" }] });
    expect(panel.choices?.toolset).toEqual(kept.get("c1"));
  });

  it("drop a change still queued when another conversation opens", async () => {
    const { api, panel } = setup();
    await panel.show("c1");
    let saved: () => void = () => {};
    api.setConversationToolset.mockImplementationOnce(() => new Promise<void>((resolve) => (saved = resolve)));
    const first = panel.setServer("fs", false);
    const queued = panel.setServer("gh", false);
    await vi.waitFor(() => expect(api.setConversationToolset).toHaveBeenCalledTimes(1));
    await panel.show("c2");
    saved();
    await Promise.all([first, queued]);
    expect(api.setConversationToolset).toHaveBeenCalledTimes(1);
    expect(api.setConversationToolset).toHaveBeenCalledWith("c1", { offServers: ["fs"], offTools: [] });
  });

  it("never write one conversation's set into another opened meanwhile", async () => {
    const { api, panel } = setup();
    api.toolChoices.mockResolvedValueOnce(choices({ offServers: ["fs"], offTools: [] }));
    await panel.show("c1");
    let answerC2: (value: ToolChoices) => void = () => {};
    api.toolChoices.mockImplementationOnce(() => new Promise((resolve) => (answerC2 = resolve)));
    const opening = panel.show("c2");
    expect(panel.choices).toBeNull();
    await panel.setServer("gh", false);
    expect(api.setConversationToolset).not.toHaveBeenCalled();
    answerC2(choices({ offServers: [], offTools: [] }));
    await opening;
    await panel.setServer("gh", false);
    expect(api.setConversationToolset).toHaveBeenCalledWith("c2", { offServers: ["gh"], offTools: [] });
  });
});

describe("a server listing a tool twice", () => {
  const tool = (name: string, tokens: number) => ({ name, title: null, on: true, tokens });
  const listed: ToolChoices = {
    toolset: { offServers: [], offTools: [] },
    servers: [
      { name: "gh", on: true, tools: [tool("search", 10), tool("search", 99), tool("toString", 5), tool("toString", 6)] },
      { name: "gh", on: true, tools: [] },
    ],
    offered: 4,
    tokens: 120,
    warning: null,
  };

  it("is listed with each server and tool once, the first kept", () => {
    const shown = distinctChoices(listed);
    expect(shown.servers).toHaveLength(1);
    expect(shown.servers[0]?.tools).toEqual([tool("search", 10), tool("toString", 5)]);
    // The host's totals stay as it counted them.
    expect(shown.offered).toBe(4);
  });

  it("reaches the panel without repeats", async () => {
    const { api, panel } = setup();
    api.toolChoices.mockResolvedValue(listed);
    await panel.show("c1");
    expect(panel.choices?.servers.flatMap((server) => server.tools.map((t) => t.name))).toEqual(["search", "toString"]);
  });
});
