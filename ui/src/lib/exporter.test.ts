import { describe, expect, it, vi } from "vitest";
import { Exporter } from "./exporter.svelte";

describe("Exporter", () => {
  it("says where the export went, nothing when cancelled, and why it failed", async () => {
    const exportConversation = vi.fn();
    const exporter = new Exporter({ exportConversation });
    exportConversation.mockResolvedValueOnce("/home/u/chat-0190abcd.md");
    await exporter.run("c1", "markdown");
    expect(exportConversation).toHaveBeenCalledWith("c1", "markdown");
    expect(exporter.status).toBe("Exported to /home/u/chat-0190abcd.md");
    exportConversation.mockResolvedValueOnce(null);
    await exporter.run("c1", "json");
    expect(exporter.status).toBeNull();
    expect(exporter.error).toBeNull();
    exportConversation.mockRejectedValueOnce(new Error("cannot write /ro/x.md: read-only file system"));
    await exporter.run("c1", "json");
    expect(exporter.error).toContain("read-only file system");
    expect(exporter.busy).toBe(false);
  });
});
