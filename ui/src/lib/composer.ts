// Keyboard rules of the message composer.

type KeyLike = Pick<KeyboardEvent, "key" | "shiftKey" | "isComposing">;

/** Enter sends; Shift+Enter breaks the line; Enter that confirms an IME composition does neither. */
export function shouldSend(event: KeyLike): boolean {
  return event.key === "Enter" && !event.shiftKey && !event.isComposing;
}
