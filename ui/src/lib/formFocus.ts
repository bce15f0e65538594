// A form that opens below a long list is brought into view with its first field focused,
// so neither the eye nor the keyboard has to look for it.
import type { Action } from "svelte/action";

export const shownAndFocused: Action<HTMLElement> = (node) => {
  if (typeof node.scrollIntoView === "function") node.scrollIntoView({ block: "nearest" });
  node.querySelector<HTMLElement>("input:not([disabled]), textarea, select")?.focus();
};
