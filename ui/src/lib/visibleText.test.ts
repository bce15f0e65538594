import { describe, expect, it } from "vitest";
import { visible, visibleJson } from "./visibleText";

describe("visible", () => {
  it("shows a right-to-left override as its code, so a name reads as it is", () => {
    expect(visible("report\u202Efdp.sh")).toBe("report\\u{202e}fdp.sh");
  });

  it("shows zero-width, tag and control characters as codes", () => {
    expect(visible("a\u200Bb")).toBe("a\\u{200b}b");
    // Unicode tag characters carry hidden instructions past a reader.
    expect(visible("hi\u{E0049}\u{E0067}")).toBe("hi\\u{e0049}\\u{e0067}");
    expect(visible("x\u001B[31my")).toBe("x\\u{1b}[31my");
    expect(visible("line\u2028break")).toBe("line\\u{2028}break");
  });

  it("keeps line breaks and tabs only when asked", () => {
    expect(visible("a\nb\tc")).toBe("a\\u{a}b\\u{9}c");
    expect(visible("a\nb\tc", { keepLines: true })).toBe("a\nb\tc");
    expect(visible("a\rb", { keepLines: true })).toBe("a\\u{d}b");
  });

  it("leaves ordinary text of any script alone", () => {
    for (const text of ["plain", "Grüße", "日本語", "עברית", "emoji 🎉", "a-b_c.d"]) {
      expect(visible(text)).toBe(text);
    }
  });
});

describe("visibleJson", () => {
  it("shows what hides inside argument values, keeping the indentation", () => {
    const shown = visibleJson({ path: "invoice\u202Egpj.exe", note: "two\nlines" });
    expect(shown).toBe('{\n  "path": "invoice\\u{202e}gpj.exe",\n  "note": "two\\nlines"\n}');
  });
});
