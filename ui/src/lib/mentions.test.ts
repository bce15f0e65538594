// The composer's mentions without a DOM: a typed fake Api answered by hand.
import { describe, expect, it, vi, type Mock } from "vitest";
import { withFrozenPrototype } from "./frozenPrototype";
import { MentionController, offerKey, triggerAt, type MentionApi } from "./mentions.svelte";
import type { Mentionables } from "./types";

type FakeApi = { [Name in keyof MentionApi]: Mock<MentionApi[Name]> };

const offered: Mentionables = {
  resources: [
    { server: "ev", uri: "demo://doc/architecture.md", name: "architecture.md", title: null, description: null, mime: "text/markdown" },
    { server: "ev", uri: "demo://doc/features.md", name: "features.md", title: "Features", description: null, mime: null },
  ],
  templates: [
    { server: "ev", uriTemplate: "demo://text/{resourceId}", name: "Dynamic Text", title: null, description: null, arguments: ["resourceId"] },
  ],
  prompts: [
    { server: "ev", name: "simple-prompt", title: null, description: null, arguments: [] },
    {
      server: "ev",
      name: "args-prompt",
      title: null,
      description: null,
      arguments: [
        { name: "city", title: null, description: null, required: true },
        { name: "state", title: null, description: null, required: false },
      ],
    },
  ],
  problems: [],
  notes: [],
};

function setup() {
  const api: FakeApi = {
    mentionables: vi.fn(() => Promise.resolve(offered)),
    completeMention: vi.fn(() => Promise.resolve(["Engineering"])),
  };
  return { api, mentions: new MentionController(api) };
}

describe("triggerAt", () => {
  it("finds @ after a space or at the start, and / only as the first character", () => {
    expect(triggerAt("@arc", 4)).toEqual({ kind: "resource", query: "arc", start: 0 });
    expect(triggerAt("see @fea", 8)).toEqual({ kind: "resource", query: "fea", start: 4 });
    expect(triggerAt("mail a@b.c", 10)).toBeNull();
    expect(triggerAt("/args", 5)).toEqual({ kind: "prompt", query: "args", start: 0 });
    expect(triggerAt("a/b", 3)).toBeNull();
    expect(triggerAt("@done ", 6)).toBeNull();
  });
});

describe("MentionController", () => {
  it("offers resources and templates for @, prompts for /, read once", async () => {
    const { api, mentions } = setup();
    mentions.typed("@", 1);
    await vi.waitFor(() => expect(mentions.offered).not.toBeNull());
    expect(mentions.offers.map((o) => o.kind)).toEqual(["resource", "resource", "template"]);
    mentions.typed("@feat", 5);
    expect(mentions.offers).toHaveLength(1);
    mentions.typed("/args", 5);
    expect(mentions.offers.map((o) => o.item.name)).toEqual(["args-prompt"]);
    expect(api.mentionables).toHaveBeenCalledTimes(1);
    // The servers changed while choosing: read again at once, the offers stay on screen.
    mentions.forget();
    expect(mentions.offers).toHaveLength(1);
    await vi.waitFor(() => expect(api.mentionables).toHaveBeenCalledTimes(2));
    await vi.waitFor(() => expect(mentions.offered).not.toBeNull());
    // Changed while not choosing: read again on the next trigger.
    mentions.typed("plain", 5);
    mentions.forget();
    expect(mentions.offered).toBeNull();
    mentions.typed("@", 1);
    await vi.waitFor(() => expect(api.mentionables).toHaveBeenCalledTimes(3));
  });

  it("attaches a resource and takes the @query out of the text", async () => {
    const { mentions } = setup();
    await mentions.reload();
    mentions.typed("Summarize @arch", 15);
    const [first] = mentions.offers;
    expect(mentions.choose(first!, "Summarize @arch")).toBe("Summarize ");
    expect(mentions.attached).toEqual([
      { label: "ev: architecture.md", mention: { kind: "resource", server: "ev", uri: "demo://doc/architecture.md" } },
    ]);
    expect(mentions.any).toBe(true);
  });

  it("fills a prompt's arguments with the server's completions, refusing an empty required one", async () => {
    const { api, mentions } = setup();
    await mentions.reload();
    mentions.typed("/args", 5);
    const [prompt] = mentions.offers;
    expect(mentions.choose(prompt!, "/args")).toBe("");
    expect(mentions.filling?.arguments).toEqual(["city", "state"]);
    expect(mentions.confirm()).toBe(false);
    expect(mentions.error).toBe("Fill in city.");
    await mentions.complete("city", "Ly");
    expect(api.completeMention).toHaveBeenCalledWith("ev", { kind: "prompt", name: "args-prompt" }, "city", "Ly");
    expect(mentions.filling?.suggestions.get("city")).toEqual(["Engineering"]);
    // Suggestions for what was typed before come after those for what is typed now:
    // not shown over them.
    let answerOld: (values: string[]) => void = () => {};
    api.completeMention.mockImplementationOnce(() => new Promise((resolve) => (answerOld = resolve)));
    const old = mentions.complete("city", "L");
    api.completeMention.mockResolvedValueOnce(["Lyon"]);
    await mentions.complete("city", "Lyo");
    answerOld(["London", "Lyon"]);
    await old;
    expect(mentions.filling?.suggestions.get("city")).toEqual(["Lyon"]);
    mentions.filling!.values.set("city", "Lyon");
    expect(mentions.confirm()).toBe(true);
    expect(mentions.prompt?.mention).toEqual({ server: "ev", name: "args-prompt", arguments: { city: "Lyon", state: "" } });
  });

  it("a template is filled in, taken along once, and put back when the message could not go", async () => {
    const { mentions } = setup();
    await mentions.reload();
    mentions.typed("@Dyn", 4);
    const template = mentions.offers.find((o) => o.kind === "template")!;
    mentions.choose(template, "@Dyn");
    mentions.filling!.values.set("resourceId", "7");
    expect(mentions.confirm()).toBe(true);
    const taken = mentions.take();
    expect(taken.resources).toEqual([
      { kind: "template", server: "ev", uriTemplate: "demo://text/{resourceId}", arguments: { resourceId: "7" } },
    ]);
    expect(taken.labels).toEqual(["@ev: Dynamic Text (7)"]);
    expect(mentions.any).toBe(false);
    // Chosen meanwhile (the message came back later): kept, after what comes back.
    mentions.typed("@Dyn", 4);
    mentions.choose(template, "@Dyn");
    mentions.filling!.values.set("resourceId", "8");
    expect(mentions.confirm()).toBe(true);
    mentions.restore(taken);
    expect(mentions.attached.map((a) => a.label)).toEqual(["ev: Dynamic Text (7)", "ev: Dynamic Text (8)"]);
    // Given back twice, it is there once.
    mentions.restore(taken);
    expect(mentions.attached).toHaveLength(2);
  });

  it("says which servers could not list what they offer", async () => {
    const { api, mentions } = setup();
    api.mentionables.mockResolvedValueOnce({ ...offered, problems: ["gh: the call took longer than 10s"] });
    await mentions.reload();
    expect(mentions.error).toContain("gh:");
  });

  it("offers a list cut short and says how far it goes, as a note and not an error", async () => {
    const { api, mentions } = setup();
    const note = 'the server "files" lists more than 10000 resources; Conduit offers the first 10000 of its resources';
    api.mentionables.mockResolvedValueOnce({ ...offered, notes: [note] });
    await mentions.reload();
    mentions.typed("@", 1);
    expect(mentions.error).toBeNull();
    expect(mentions.notes).toEqual([note]);
    expect(mentions.offers.length).toBeGreaterThan(0);
  });
});

describe("a hostile server's mentionables", () => {
  const hostile: Mentionables = {
    resources: [offered.resources[0]!, offered.resources[0]!, offered.resources[1]!],
    templates: [],
    prompts: [
      {
        server: "evil",
        name: "trap",
        title: null,
        description: null,
        arguments: ["toString", "constructor", "__proto__", "hasOwnProperty", "toString"].map((name) => ({
          name,
          title: null,
          description: null,
          required: true,
        })),
      },
    ],
    problems: [],
    notes: [],
  };

  function hostileSetup() {
    const { api, mentions } = setup();
    api.mentionables.mockResolvedValue(hostile);
    api.completeMention.mockResolvedValue(["a", "b", "a", "toString", "toString"]);
    return { api, mentions };
  }

  it("offers a resource listed twice once", async () => {
    const { mentions } = hostileSetup();
    await mentions.reload();
    mentions.typed("@", 1);
    expect(mentions.offers.map((offer) => offer.item.name)).toEqual(["architecture.md", "features.md"]);
  });

  it("keys offers so that differently split names stay apart", () => {
    const resource = (server: string, name: string) => ({
      kind: "resource" as const,
      item: { server, name, uri: "x://y", title: null, description: null, mime: null },
    });
    expect(offerKey(resource("ab", "c"))).not.toBe(offerKey(resource("a", "bc")));
    expect(offerKey(resource("a", "b"))).toBe(offerKey(resource("a", "b")));
  });

  it("asks each argument once, suggests each completion once, and sends names objects inherit as own keys", async () => {
    const { mentions } = hostileSetup();
    await mentions.reload();
    mentions.typed("/trap", 5);
    mentions.choose(mentions.offers[0]!, "/trap");
    const filling = mentions.filling!;
    expect(filling.arguments).toEqual(["toString", "constructor", "__proto__", "hasOwnProperty"]);
    // Nothing typed yet: what objects inherit is not taken for a value.
    expect(mentions.confirm()).toBe(false);
    expect(mentions.error).toBe("Fill in toString, constructor, __proto__, hasOwnProperty.");
    await mentions.complete("toString", "t");
    expect(filling.suggestions.get("toString")).toEqual(["a", "b", "toString"]);
    for (const name of filling.arguments) await mentions.complete(name, `typed ${name}`);
    expect(withFrozenPrototype(() => mentions.confirm())).toBe(true);
    const sent = mentions.prompt!.mention.arguments;
    expect(Object.getPrototypeOf(sent)).toBe(Object.prototype);
    expect(Object.entries(sent)).toEqual([
      ["toString", "typed toString"],
      ["constructor", "typed constructor"],
      ["__proto__", "typed __proto__"],
      ["hasOwnProperty", "typed hasOwnProperty"],
    ]);
  });
});
