import { describe, expect, it } from "vitest";
import { speaks } from "./serverDetails";

const details = { name: "x", version: "1", instructions: null, tools: true, resources: true, prompts: false, completions: false };

describe("what a server speaks", () => {
  it("names the era and what it offers", () => {
    expect(speaks({ ...details, protocolVersion: "2026-07-28" })).toBe("2026-07-28 (stateless) · tools, resources");
    expect(speaks({ ...details, protocolVersion: "2025-11-25", tools: false, resources: false })).toBe(
      "2025-11-25 (with a session) · nothing listed",
    );
  });
});
