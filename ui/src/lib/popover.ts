// A small panel a button opens (the tools panel, the export menu): what Escape does to it.

/**
 * What an Escape does to an open panel whose button is `toggle`: nothing when another
 * part took it (a modal above, a handler that prevented it); `close` alone when it was
 * typed into a field elsewhere (a rename keeps its own Escape, focus stays there); else
 * `focus`: the panel closes, the Escape goes no further (the chat would read it as "stop
 * the turn"), and focus returns to the button.
 */
export function escapeOutcome(event: KeyboardEvent, toggle: HTMLElement | undefined): "close" | "focus" | null {
  if (event.key !== "Escape" || event.defaultPrevented) return null;
  if (document.querySelector('[aria-modal="true"]') !== null) return null;
  const active = document.activeElement;
  const inField = active instanceof HTMLInputElement || active instanceof HTMLTextAreaElement;
  return inField && toggle?.parentElement?.contains(active) !== true ? "close" : "focus";
}

/** Closes an open panel on Escape as [`escapeOutcome`] says, focus back on `toggle`. */
export function closeOnEscape(event: KeyboardEvent, toggle: HTMLElement | undefined, close: () => void): void {
  const outcome = escapeOutcome(event, toggle);
  if (outcome === null) return;
  close();
  if (outcome === "focus") {
    event.preventDefault();
    toggle?.focus();
  }
}
