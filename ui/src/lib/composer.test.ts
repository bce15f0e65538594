import { describe, expect, it } from "vitest";
import { attachmentName, imageFiles, pastesNothing, shouldSend, storedAttachment } from "./composer";
import type { MediaRef } from "./types";

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

describe("imageFiles", () => {
  const png = new File([new Uint8Array([0x89, 0x50])], "a.png", { type: "image/png" });
  const text = new File(["hi"], "a.txt", { type: "text/plain" });
  const untyped = new File([new Uint8Array([1])], "blob", { type: "" });

  it("takes the images among the files", () => {
    expect(imageFiles({ files: [png, text, untyped] as unknown as FileList })).toEqual([png, untyped]);
  });

  it("falls back to file items when the files list is empty", () => {
    const items = [
      { kind: "string", getAsFile: () => null },
      { kind: "file", getAsFile: () => png },
    ];
    expect(imageFiles({ files: [] as unknown as FileList, items })).toEqual([png]);
  });

  it("takes nothing from nothing", () => {
    expect(imageFiles(null)).toEqual([]);
  });
});

describe("pastesNothing", () => {
  it("is true only for a paste without any type", () => {
    expect(pastesNothing({ types: [] })).toBe(true);
    expect(pastesNothing({ types: ["text/plain"] })).toBe(false);
    expect(pastesNothing(null)).toBe(false);
  });
});

describe("attachments", () => {
  it("stores a file, keeps an image the host stored, and names both", async () => {
    const media: MediaRef = { hash: "a".repeat(64), mime: "image/png", bytes: 1 };
    const file = new File([new Uint8Array([1])], "cat.png", { type: "image/png" });
    const store = (f: File) => Promise.resolve({ ...media, hash: f.name });
    expect((await storedAttachment(file, store)).hash).toBe("cat.png");
    expect(await storedAttachment(media, store)).toBe(media);
    expect(attachmentName(file)).toBe("cat.png");
    expect(attachmentName(media)).toBe("pasted image");
  });
});
