import { describe, expect, it } from "vitest";
import { unique, uniqueBy } from "./unique";

describe("unique", () => {
  it("drops repeated values, keeping the first of each in order", () => {
    expect(unique(["a", "b", "a", "c", "b"])).toEqual(["a", "b", "c"]);
    expect(unique([])).toEqual([]);
  });

  it("treats names objects inherit as plain values", () => {
    expect(unique(["toString", "__proto__", "toString", "constructor", "__proto__"])).toEqual([
      "toString",
      "__proto__",
      "constructor",
    ]);
  });

  it("keeps the first item of each key", () => {
    const tools = [
      { name: "read", title: "First" },
      { name: "write", title: null },
      { name: "read", title: "Second" },
    ];
    expect(uniqueBy(tools, (tool) => tool.name)).toEqual([
      { name: "read", title: "First" },
      { name: "write", title: null },
    ]);
  });
});
