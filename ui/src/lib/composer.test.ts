import { describe, expect, it } from "vitest";
import { shouldSend } from "./composer";

describe("shouldSend", () => {
  it("sends on Enter", () => {
    expect(shouldSend({ key: "Enter", shiftKey: false, isComposing: false })).toBe(true);
  });
  it("breaks the line on Shift+Enter", () => {
    expect(shouldSend({ key: "Enter", shiftKey: true, isComposing: false })).toBe(false);
  });
  it("leaves an IME composition alone", () => {
    expect(shouldSend({ key: "Enter", shiftKey: false, isComposing: true })).toBe(false);
  });
  it("ignores other keys", () => {
    expect(shouldSend({ key: "a", shiftKey: false, isComposing: false })).toBe(false);
  });
});
