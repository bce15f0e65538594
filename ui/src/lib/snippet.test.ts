import { describe, expect, it } from "vitest";
import { snippetParts } from "./snippet";

describe("snippetParts", () => {
  it("marks only what the store marked, and keeps the text's own brackets", () => {
    expect(snippetParts("see data[0] then \uE000crabs\uE001 [link]")).toEqual([
      { text: "see data[0] then ", match: false },
      { text: "crabs", match: true },
      { text: " [link]", match: false },
    ]);
  });

  it("splits several matches and a snippet without any", () => {
    expect(snippetParts("\uE000hermit\uE001 \uE000crabs\uE001")).toEqual([
      { text: "hermit", match: true },
      { text: " ", match: false },
      { text: "crabs", match: true },
    ]);
    expect(snippetParts("nothing marked")).toEqual([{ text: "nothing marked", match: false }]);
  });
});
