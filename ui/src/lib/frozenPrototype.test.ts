import { describe, expect, it } from "vitest";
import { withFrozenPrototype } from "./frozenPrototype";

describe("withFrozenPrototype", () => {
  it("makes assigning an inherited name throw while it runs, and undoes that afterwards", () => {
    const assign = (name: string): Record<string, number> => {
      const object: Record<string, number> = {};
      object[name] = 1;
      return object;
    };
    expect(() => withFrozenPrototype(() => assign("toString"))).toThrow(TypeError);
    expect(() => withFrozenPrototype(() => assign("constructor"))).toThrow(TypeError);
    expect(withFrozenPrototype(() => assign("repo"))).toEqual({ repo: 1 });
    expect(Object.hasOwn(assign("toString"), "toString")).toBe(true);
  });
});
