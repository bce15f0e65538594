// Keyboard rules of the message composer, and what it holds as attachments.
import { MAX_DOCUMENT_BYTES, MAX_FILE_TEXT } from "./attachedLimits";
import type { AttachedFile, MediaRef } from "./types";
import { visible } from "./visibleText";

export { MAX_DOCUMENT_BYTES, MAX_FILE_TEXT };

/** A PDF the host stored, under the name it was attached with (Edit gives it back). */
export type StoredDocument = { name: string; media: MediaRef };

/**
 * An attachment: a file the page read (picked, dropped, pasted) that is stored or read
 * when the message is sent, an image the host already stored (a paste it read from the
 * clipboard), or a stored PDF given back by Edit.
 */
export type Attachment = File | MediaRef | StoredDocument;

function isStoredDocument(attachment: Attachment): attachment is StoredDocument {
  return !(attachment instanceof File) && "media" in attachment;
}

/** The attachment's name as the composer lists it, hidden characters shown as codes. */
export function attachmentName(attachment: Attachment): string {
  if (isStoredDocument(attachment)) return visible(attachment.name);
  return attachment instanceof File && attachment.name ? visible(attachment.name) : "pasted image";
}

/** What an attachment goes as: an image or a PDF the host stored, or a text file's name
 *  and text (which the host checks again). */
export type Prepared =
  | { type: "image"; media: MediaRef }
  | { type: "document"; document: StoredDocument }
  | { type: "file"; file: AttachedFile };

/** The first bytes of every PDF. */
const PDF_HEADER = "%PDF-";

/**
 * An attachment made ready to send. An image file is stored with `store`; a PDF (by its
 * first bytes: one may be all ASCII, so read as text) is stored too; any other file is
 * read as UTF-8 text; a file that is none of these and has no type is stored too, so that
 * the host decides by its bytes (WebKitGTK gives a pasted image no type) and says what it
 * takes.
 */
export async function preparedAttachment(
  attachment: Attachment,
  store: (file: File) => Promise<MediaRef>,
): Promise<Prepared> {
  if (isStoredDocument(attachment)) return { type: "document", document: attachment };
  if (!(attachment instanceof File)) return { type: "image", media: attachment };
  const name = visible(attachment.name);
  // Its bytes first: a PDF may come with an image's type, or none.
  const head = new TextDecoder("latin1").decode(await bytesOf(attachment.slice(0, PDF_HEADER.length)));
  if (head === PDF_HEADER) {
    if (attachment.size > MAX_DOCUMENT_BYTES) {
      const mib = Math.ceil(attachment.size / (1024 * 1024));
      throw new Error(`${name} is ${mib} MiB; the largest PDF Conduit attaches is ${MAX_DOCUMENT_BYTES / (1024 * 1024)} MiB`);
    }
    const media = await store(attachment);
    if (media.mime !== "application/pdf") throw new Error(`${name} was not stored as a PDF`);
    return { type: "document", document: { name: attachment.name, media } };
  }
  if (attachment.type.startsWith("image/")) return { type: "image", media: await store(attachment) };
  const large = attachment.size > MAX_FILE_TEXT;
  // A file too large to attach is not read whole: its start tells text from not.
  const text = utf8Text(await bytesOf(large ? attachment.slice(0, 4096) : attachment), !large);
  if (text !== null) {
    if (!large) return { type: "file", file: { name: attachment.name, text } };
    throw new Error(`${name} holds more than ${MAX_FILE_TEXT / 1024} KiB of text, the most Conduit attaches from one file`);
  }
  if (attachment.type === "") return { type: "image", media: await store(attachment) };
  throw new Error(
    `${name} is not a text file: attach images (PNG, JPEG, GIF, WebP), PDFs or text (code, Markdown, CSV, JSON, logs)`,
  );
}

/** A file's bytes, read with a FileReader: the jsdom the tests run in has no `Blob.arrayBuffer`. */
export function bytesOf(file: Blob): Promise<ArrayBuffer> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => (reader.result instanceof ArrayBuffer ? resolve(reader.result) : reject(new Error("the file could not be read")));
    reader.onerror = () => reject(reader.error ?? new Error("the file could not be read"));
    reader.readAsArrayBuffer(file);
  });
}

/** `bytes` as text when they are UTF-8 (a byte order mark dropped) with no NUL; else null.
 *  Not `whole`: the start of a file, which may end inside a character. */
function utf8Text(bytes: ArrayBuffer, whole: boolean): string | null {
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: !whole });
    return text.includes("\u0000") ? null : text;
  } catch {
    return null;
  }
}

/** How big an attached text file is, as its card says: `120 lines · 4.1 KiB`. Lines are
 *  counted as the host counts them (Rust's `str::lines`: a line ends at `\n`). */
export function fileSummary(text: string): string {
  const breaks = text.split("\n").length - 1;
  const lines = text === "" ? 0 : text.endsWith("\n") ? breaks : breaks + 1;
  const bytes = new TextEncoder().encode(text).length;
  const size = bytes < 1024 ? `${bytes} bytes` : `${(bytes / 1024).toFixed(1)} KiB`;
  return `${lines.toLocaleString("en")} ${lines === 1 ? "line" : "lines"} · ${size}`;
}

/** The name a resource's PDF goes under, as the host names it for the model and its notes
 *  (`core::content::resource_document_name`): its URI's last path part, decoded, kept as a
 *  file name is (its last part, not empty, `.` or `..`, at most 255 bytes once what hides
 *  characters is shown as codes), else `document.pdf`. */
export function resourceName(uri: string): string {
  const path = uri.split(/[?#]/)[0] ?? uri;
  const last = path.replace(/\/+$/, "").split("/").pop() || uri;
  const name = (percentDecoded(last).split("/").pop() ?? "").trim();
  const fits = name !== "" && name !== "." && name !== ".." && new TextEncoder().encode(visible(name)).length <= 255;
  return fits ? name : "document.pdf";
}

/** `text` with each `%XX` decoded as a byte, the bytes read as UTF-8 (what is no UTF-8 as
 *  U+FFFD), as the host's `percent_decode_str(…).decode_utf8_lossy()` reads it: a bad
 *  escape (`%ZZ`) stays as written. */
function percentDecoded(text: string): string {
  const encoder = new TextEncoder();
  const bytes: number[] = [];
  for (let at = 0; at < text.length; ) {
    const hex = text.slice(at + 1, at + 3);
    if (text[at] === "%" && /^[0-9a-fA-F]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      at += 3;
    } else {
      const character = String.fromCodePoint(text.codePointAt(at) ?? 0xfffd);
      bytes.push(...encoder.encode(character));
      at += character.length;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

/** How big an attached PDF is, as its card says: `PDF · 2.4 MB`. */
export function documentSummary(media: MediaRef): string {
  // Kilobytes rounded up, as the host counts them in its notes.
  const size = media.bytes < 1_000_000 ? `${Math.max(1, Math.ceil(media.bytes / 1000))} KB` : `${(media.bytes / 1_000_000).toFixed(1)} MB`;
  return `PDF · ${size}`;
}

/** A text file of a stored message back as a file the composer holds (Edit). */
export function attachedAgain(file: AttachedFile): File {
  return new File([file.text], file.name, { type: "text/plain" });
}

type KeyLike = Pick<KeyboardEvent, "key" | "shiftKey" | "isComposing">;

/** Enter sends; Shift+Enter breaks the line; Enter that confirms an IME composition does neither. */
export function shouldSend(event: KeyLike): boolean {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing;
}

type FileSource = { files: FileList | null } & { items?: ArrayLike<Pick<DataTransferItem, "kind" | "getAsFile">> };

/**
 * The files in a paste or a drop. Some webviews (WebKitGTK) list a pasted image only among
 * the items, not the files.
 */
export function droppedFiles(source: FileSource | null | undefined): File[] {
  if (!source) return [];
  const files = Array.from(source.files ?? []);
  if (files.length > 0 || !source.items) return files;
  return Array.from(source.items)
    .filter((item) => item.kind === "file")
    .map((item) => item.getAsFile())
    .filter((file): file is File => file !== null);
}

/**
 * The files in a paste that attach: images and PDFs, and a file without a type (the host
 * decides by its bytes). Text pasted is typed text, not a file.
 */
export function pastedFiles(source: FileSource | null | undefined): File[] {
  return droppedFiles(source).filter((file) => file.type === "" || file.type.startsWith("image/") || file.type === "application/pdf");
}

/** A paste that carries no data the page can read (no type at all): WebKitGTK's image paste. */
export function pastesNothing(data: Pick<DataTransfer, "types"> | null | undefined): boolean {
  return !!data && data.types.length === 0;
}

/** How the host's `clipboard_image` starts its refusal when the clipboard holds no image
 *  (`ClipboardError::Read` in src-tauri/src/media.rs): a paste of nothing, said nowhere. */
const NO_IMAGE_ON_THE_CLIPBOARD = "no image on the clipboard";

/** What to tell the user when the host could not attach the clipboard's image; null when
 *  the clipboard simply held none. */
export function pasteProblem(message: string): string | null {
  return message.startsWith(NO_IMAGE_ON_THE_CLIPBOARD) ? null : `The pasted image was not attached: ${message}`;
}
