import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import Sidebar from "./Sidebar.svelte";

const props = {
  version: "1.0.0",
  conversations: [{ id: "c1", title: "Q3 plans", provider: null, model: null, createdAt: 1, updatedAt: 1, messageCount: 2, pinned: false }],
  activeConversation: null,
  onNewChat: () => {},
  onOpenSettings: () => {},
  onOpenConversation: () => {},
  onRename: () => {},
  onDelete: () => {},
};

describe("Sidebar", () => {
  it("offers older conversations only when more exist, and asks for them", async () => {
    const onShowOlder = vi.fn();
    const shown = render(Sidebar, { ...props, olderConversations: true, onShowOlder });
    await fireEvent.click(screen.getByRole("button", { name: "Show older conversations" }));
    expect(onShowOlder).toHaveBeenCalledTimes(1);
    shown.unmount();
    render(Sidebar, { ...props, olderConversations: false, onShowOlder });
    expect(screen.queryByRole("button", { name: "Show older conversations" })).toBeNull();
  });

  it("pins a conversation, and shows a pinned one's pin to unpin it", async () => {
    const onPin = vi.fn();
    const shown = render(Sidebar, { ...props, onPin });
    await fireEvent.click(screen.getByRole("button", { name: "Pin Q3 plans" }));
    expect(onPin).toHaveBeenCalledWith("c1", true);
    shown.unmount();
    render(Sidebar, { ...props, onPin, conversations: props.conversations.map((c) => ({ ...c, pinned: true })) });
    const unpin = screen.getByRole("button", { name: "Unpin Q3 plans" });
    expect(unpin.className).not.toContain("opacity-0");
    await fireEvent.click(unpin);
    expect(onPin).toHaveBeenLastCalledWith("c1", false);
  });

  it("opens the rename field with the keyboard in it, the title selected", async () => {
    render(Sidebar, props);
    await fireEvent.click(screen.getByRole("button", { name: "Rename Q3 plans" }));
    const field = screen.getByRole("textbox", { name: "New title" }) as HTMLInputElement;
    expect(document.activeElement).toBe(field);
    expect(field.value).toBe("Q3 plans");
    await Promise.resolve();
    expect([field.selectionStart, field.selectionEnd]).toEqual([0, "Q3 plans".length]);
  });
});
