// Keyboard rules of the message composer, and what it holds as attachments.
import type { MediaRef } from "./types";

/**
 * An attachment: a file the page read (picked, dropped, pasted) that is stored when the
 * message is sent, or an image the host already stored (a paste it read from the clipboard).
 */
export type Attachment = File | MediaRef;

/** The attachment's name as the composer lists it. */
export function attachmentName(attachment: Attachment): string {
  return attachment instanceof File && attachment.name ? attachment.name : "pasted image";
}

/** The stored image for an attachment: a file is stored with `store`, a stored one kept. */
export function storedAttachment(
  attachment: Attachment,
  store: (file: File) => Promise<MediaRef>,
): Promise<MediaRef> {
  return attachment instanceof File ? store(attachment) : Promise.resolve(attachment);
}

type KeyLike = Pick<KeyboardEvent, "key" | "shiftKey" | "isComposing">;

/** Enter sends; Shift+Enter breaks the line; Enter that confirms an IME composition does neither. */
export function shouldSend(event: KeyLike): boolean {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing;
}

type FileSource = { files: FileList | null } & { items?: ArrayLike<Pick<DataTransferItem, "kind" | "getAsFile">> };

/**
 * The image files in a paste or a drop. Some webviews (WebKitGTK) list a pasted image only
 * among the items, not the files; a file without a type goes too: the host decides by its bytes.
 */
export function imageFiles(source: FileSource | null | undefined): File[] {
  if (!source) return [];
  let files = Array.from(source.files ?? []);
  if (files.length === 0 && source.items) {
    files = Array.from(source.items)
      .filter((item) => item.kind === "file")
      .map((item) => item.getAsFile())
      .filter((file): file is File => file !== null);
  }
  return files.filter((file) => file.type === "" || file.type.startsWith("image/"));
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
