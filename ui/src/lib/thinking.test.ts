import { describe, expect, it } from "vitest";
import { saveThinking, savedThinking, thinkingLabel, thinkingOf, thinkingValue, THINKING_LEVELS } from "./thinking";

function memory(): Storage {
  const items = new Map<string, string>();
  return {
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => void items.set(key, value),
    removeItem: (key) => void items.delete(key),
    clear: () => items.clear(),
    key: () => null,
    get length() {
      return items.size;
    },
  };
}

describe("thinking", () => {
  it("keeps the level picked, and the model's default as nothing kept", () => {
    const storage = memory();
    expect(savedThinking(storage)).toBeNull();
    saveThinking(storage, "high");
    expect(savedThinking(storage)).toBe("high");
    saveThinking(storage, null);
    expect(savedThinking(storage)).toBeNull();
    expect(storage.length).toBe(0);
  });

  it("reads an unknown or tampered value as the model's default", () => {
    const storage = memory();
    for (const value of ["HIGH", "max", "", "__proto__", "low "]) {
      storage.setItem("conduit-thinking", value);
      expect(savedThinking(storage)).toBeNull();
    }
  });

  it("turns the list's values into levels and back", () => {
    for (const level of [null, ...THINKING_LEVELS]) {
      expect(thinkingOf(thinkingValue(level))).toBe(level);
    }
    expect(thinkingOf("extreme")).toBeNull();
    expect([null, ...THINKING_LEVELS].map(thinkingLabel)).toEqual(["Default", "Low", "Medium", "High"]);
  });
});
