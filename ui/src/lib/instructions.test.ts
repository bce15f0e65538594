import { describe, expect, it, vi } from "vitest";
import { InstructionsController, MAX_INSTRUCTIONS, type InstructionsApi } from "./instructions.svelte";

function setup() {
  const api = {
    conversationInstructions: vi.fn<InstructionsApi["conversationInstructions"]>(),
    setConversationInstructions: vi.fn<InstructionsApi["setConversationInstructions"]>(),
  };
  return { api, panel: new InstructionsController(api) };
}

describe("a conversation's instructions", () => {
  it("holds a new chat's until its first message takes them along", async () => {
    const { api, panel } = setup();
    await panel.show(null);
    expect(panel.forNewChat()).toBeNull();
    panel.text = "Answer like a pirate.";
    expect(panel.changed).toBe(true);
    expect(await panel.save()).toBe(true);
    expect(api.setConversationInstructions).not.toHaveBeenCalled();
    expect(panel.active).toBe(true);
    expect(panel.forNewChat()).toBe("Answer like a pirate.");
    // Typed and not saved, they go too.
    panel.text = "Answer like a parrot.";
    expect(panel.forNewChat()).toBe("Answer like a parrot.");
    // Blank is none, saved or not.
    panel.text = "   ";
    expect(panel.forNewChat()).toBeNull();
    await panel.save();
    expect(panel.forNewChat()).toBeNull();
  });

  it("reads and keeps a saved conversation's through the host, the newest read winning", async () => {
    const { api, panel } = setup();
    let answer!: (text: string) => void;
    api.conversationInstructions.mockReturnValueOnce(new Promise((done) => (answer = done)));
    const first = panel.show("c1");
    api.conversationInstructions.mockResolvedValueOnce("Answer in French.");
    await panel.show("c2");
    answer("Old conversation's");
    await first;
    expect(panel.text).toBe("Answer in French.");
    expect(panel.forNewChat()).toBeNull();
    // A read that fails leaves nothing of the conversation shown before.
    api.conversationInstructions.mockRejectedValueOnce(new Error("gone"));
    await panel.show("c3");
    expect(panel.text).toBe("");
    expect(panel.active).toBe(false);
    expect(panel.error).toContain("gone");
    api.conversationInstructions.mockResolvedValueOnce("Answer in French.");
    await panel.show("c2");

    api.setConversationInstructions.mockResolvedValue(undefined);
    panel.text = "Answer in German.";
    expect(await panel.save()).toBe(true);
    expect(api.setConversationInstructions).toHaveBeenCalledWith("c2", "Answer in German.");
    expect(panel.saved).toBe("Answer in German.");
    expect(panel.changed).toBe(false);
  });

  it("says a refusal and keeps what was typed; refuses more than the host keeps before asking", async () => {
    const { api, panel } = setup();
    api.conversationInstructions.mockResolvedValue("");
    await panel.show("c1");
    api.setConversationInstructions.mockRejectedValue(new Error("the history file is read-only"));
    panel.text = "Be brief.";
    expect(await panel.save()).toBe(false);
    expect(panel.error).toContain("read-only");
    expect(panel.text).toBe("Be brief.");
    expect(panel.saved).toBe("");

    panel.text = "x".repeat(MAX_INSTRUCTIONS + 1);
    expect(panel.tooLong).toBe(true);
    api.setConversationInstructions.mockClear();
    expect(await panel.save()).toBe(false);
    expect(api.setConversationInstructions).not.toHaveBeenCalled();
    expect(panel.error).toContain("20,000");
  });
});
