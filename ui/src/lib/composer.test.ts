import { describe, expect, it } from "vitest";
import {
  MAX_DOCUMENT_BYTES,
  MAX_FILE_TEXT,
  attachedAgain,
  attachmentName,
  bytesOf,
  documentSummary,
  droppedFiles,
  resourceName,
  fileSummary,
  pastedFiles,
  pastesNothing,
  preparedAttachment,
  shouldSend,
} from "./composer";
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

describe("pastedFiles", () => {
  const png = new File([new Uint8Array([0x89, 0x50])], "a.png", { type: "image/png" });
  const text = new File(["hi"], "a.txt", { type: "text/plain" });
  const untyped = new File([new Uint8Array([1])], "blob", { type: "" });

  it("takes the images and PDFs among the files", () => {
    const pdf = new File(["%PDF-1.7"], "paper.pdf", { type: "application/pdf" });
    expect(pastedFiles({ files: [png, text, untyped, pdf] as unknown as FileList })).toEqual([png, untyped, pdf]);
  });

  it("falls back to file items when the files list is empty", () => {
    const items = [
      { kind: "string", getAsFile: () => null },
      { kind: "file", getAsFile: () => png },
    ];
    expect(pastedFiles({ files: [] as unknown as FileList, items })).toEqual([png]);
  });

  it("takes nothing from nothing", () => {
    expect(pastedFiles(null)).toEqual([]);
  });

  it("takes every file of a drop, text ones too", () => {
    expect(droppedFiles({ files: [png, text, untyped] as unknown as FileList })).toEqual([png, text, untyped]);
    expect(droppedFiles(null)).toEqual([]);
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
  const media: MediaRef = { hash: "a".repeat(64), mime: "image/png", bytes: 1 };
  const stored: string[] = [];
  const store = (f: File) => {
    stored.push(f.name);
    return Promise.resolve({ ...media, hash: f.name });
  };

  it("stores an image file, keeps an image the host stored, and names both", async () => {
    const file = new File([new Uint8Array([1])], "cat.png", { type: "image/png" });
    expect(await preparedAttachment(file, store)).toEqual({ type: "image", media: { ...media, hash: "cat.png" } });
    expect(await preparedAttachment(media, store)).toEqual({ type: "image", media });
    expect(attachmentName(file)).toBe("cat.png");
    expect(attachmentName(media)).toBe("pasted image");
  });

  it("reads a text file, of any type or none, without its byte order mark", async () => {
    stored.length = 0;
    const csv = new File(["\uFEFFcity,temp\nOslo,4\n"], "weather.csv", { type: "text/csv" });
    expect(await preparedAttachment(csv, store)).toEqual({ type: "file", file: { name: "weather.csv", text: "city,temp\nOslo,4\n" } });
    const makefile = new File(["all:\n\tcargo build\n"], "Makefile", { type: "" });
    expect(await preparedAttachment(makefile, store)).toEqual({ type: "file", file: { name: "Makefile", text: "all:\n\tcargo build\n" } });
    expect(stored).toEqual([]);
  });

  it("refuses binary and too large files of a known type, and lets the host judge an untyped one", async () => {
    stored.length = 0;
    const pdf = new File([new Uint8Array([0x25, 0x50, 0x44, 0x46, 0xff, 0xfe, 0x00])], "paper.pdf", { type: "application/pdf" });
    await expect(preparedAttachment(pdf, store)).rejects.toThrow("paper.pdf is not a text file: attach images");
    const huge = new File(["x".repeat(MAX_FILE_TEXT + 1)], "huge.log", { type: "text/plain" });
    await expect(preparedAttachment(huge, store)).rejects.toThrow("huge.log holds more than 512 KiB of text");
    // A large binary file is no text, however large; its name shows what hides in it.
    const bigPdf = new File([new Uint8Array(MAX_FILE_TEXT + 10).fill(0xff)], "paper\u202e.pdf", { type: "application/pdf" });
    await expect(preparedAttachment(bigPdf, store)).rejects.toThrow("paper\\u{202e}.pdf is not a text file");
    const withNul = new File(["a\u0000b"], "nul.txt", { type: "text/plain" });
    await expect(preparedAttachment(withNul, store)).rejects.toThrow("nul.txt is not a text file");
    // WebKitGTK gives a pasted image no type: stored, the host decides by its bytes.
    const untypedImage = new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0xff])], "", { type: "" });
    expect((await preparedAttachment(untypedImage, store)).type).toBe("image");
    expect(stored).toEqual([""]);
    // A large text file with no type (a Makefile) is too much text, not an image.
    const bigMakefile = new File(["all:\n".repeat(MAX_FILE_TEXT)], "Makefile", { type: "" });
    await expect(preparedAttachment(bigMakefile, store)).rejects.toThrow("Makefile holds more than 512 KiB of text");
    expect(stored).toEqual([""]);
    // A large file with no type that is no text goes to the host too, which says what it takes.
    const untypedBig = new File([new Uint8Array(MAX_FILE_TEXT + 10)], "dump", { type: "" });
    expect((await preparedAttachment(untypedBig, store)).type).toBe("image");
    expect(stored).toEqual(["", "dump"]);
  });

  it("gives a stored file back as a file, and sums it up", async () => {
    const again = attachedAgain({ name: "plan.md", text: "# Plan\n- ship\n" });
    expect(again.name).toBe("plan.md");
    expect(new TextDecoder().decode(await bytesOf(again))).toBe("# Plan\n- ship\n");
    expect(fileSummary("# Plan\n- ship\n")).toBe("2 lines · 14 bytes");
    expect(fileSummary("one line, no end")).toBe("1 line · 16 bytes");
    expect(fileSummary("a\r\nb\r\nc")).toBe("3 lines · 7 bytes");
    expect(fileSummary("a\rb")).toBe("1 line · 3 bytes");
    expect(fileSummary("x".repeat(4100) + "\n")).toBe("1 line · 4.0 KiB");
    expect(fileSummary("é\n".repeat(1500))).toBe("1,500 lines · 4.4 KiB");
    expect(fileSummary("x".repeat(MAX_FILE_TEXT))).toBe("1 line · 512.0 KiB");
  });

  it("stores a PDF by its first bytes, whatever its type or name, and gives a stored one back", async () => {
    const kept: File[] = [];
    const pdfStore = (f: File) => {
      kept.push(f);
      return Promise.resolve({ hash: "b".repeat(64), mime: "application/pdf", bytes: f.size });
    };
    const body = "%PDF-1.7\n1 0 obj << /Type /Catalog >> endobj\n" + "x".repeat(2_400_000);
    const paper = new File([body], "attention.pdf", { type: "application/pdf" });
    const stored = { hash: "b".repeat(64), mime: "application/pdf", bytes: paper.size };
    // All ASCII, so it would read as text: its header makes it a PDF.
    expect(await preparedAttachment(paper, pdfStore)).toEqual({ type: "document", document: { name: "attention.pdf", media: stored } });
    const untyped = new File([body], "download", { type: "" });
    expect(await preparedAttachment(untyped, pdfStore)).toEqual({ type: "document", document: { name: "download", media: stored } });
    // Named as an image, its bytes say PDF.
    const misnamed = new File([body], "scan.png", { type: "image/png" });
    expect((await preparedAttachment(misnamed, pdfStore)).type).toBe("document");
    expect(kept).toEqual([paper, untyped, misnamed]);
    const again = { name: "attention.pdf", media: stored };
    expect(await preparedAttachment(again, pdfStore)).toEqual({ type: "document", document: again });
    expect(attachmentName(again)).toBe("attention.pdf");
    expect(attachmentName({ name: "a\u202etxt.pdf", media: stored })).toBe("a\\u{202e}txt.pdf");
    expect(kept).toHaveLength(3);
    expect(documentSummary(stored)).toBe("PDF · 2.4 MB");
    expect(documentSummary({ ...stored, bytes: 181_000 })).toBe("PDF · 181 KB");
    expect(documentSummary({ ...stored, bytes: 181_200 })).toBe("PDF · 182 KB");
    expect(documentSummary({ ...stored, bytes: 12 })).toBe("PDF · 1 KB");
    expect(resourceName("drive://files/q3.pdf?rev=2#p4")).toBe("q3.pdf");
    expect(resourceName("drive://files/Q3%20report.pdf")).toBe("Q3 report.pdf");
    expect(resourceName("drive://files/100%.pdf")).toBe("100%.pdf");
    expect(resourceName("file:///reports/")).toBe("reports");
    expect(resourceName("x:report.pdf")).toBe("x:report.pdf");
    expect(resourceName("drive://f/%2e%2e")).toBe("document.pdf");
    expect(resourceName("///")).toBe("document.pdf");
    expect(resourceName("drive://f/a%2Fb.pdf")).toBe("b.pdf");
    expect(resourceName("drive://f/Q3%20report%ZZ.pdf")).toBe("Q3 report%ZZ.pdf");
    expect(resourceName("drive://f/caf%C3%A9.pdf")).toBe("café.pdf");
    expect(resourceName(`drive://f/${"x".repeat(300)}.pdf`)).toBe("document.pdf");
  });

  it("refuses a PDF over the host's limit before storing it, and one the host did not store as a PDF", async () => {
    const kept: File[] = [];
    const imageStore = (f: File) => {
      kept.push(f);
      return Promise.resolve(media);
    };
    const huge = new File([new TextEncoder().encode("%PDF-1.4\n"), new Uint8Array(MAX_DOCUMENT_BYTES)], "scan.pdf", { type: "application/pdf" });
    await expect(preparedAttachment(huge, imageStore)).rejects.toThrow("scan.pdf is 33 MiB; the largest PDF Conduit attaches is 32 MiB");
    expect(kept).toEqual([]);
    const odd = new File(["%PDF-1.4\n"], "odd.pdf", { type: "application/pdf" });
    await expect(preparedAttachment(odd, imageStore)).rejects.toThrow("odd.pdf was not stored as a PDF");
  });
});
