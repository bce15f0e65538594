// Consent buttons (a view's message's Send, a tool's Allow, a sampling request's Approve, a
// server's form's Submit…) that take no click until they have been in place a moment. A
// view or a server that makes a prompt appear, or slide, under the user's cursor between
// two clicks (a double-click it asked for) gets the second click ignored.
import type { Action } from "svelte/action";

/** How long a consent button stays disabled once it shows or moves. */
export const ARM_MS = 500;

/** Re-arms each consent button on screen (the functions of the mounted ones). */
const onScreen = new Set<() => void>();
/** Re-arms each consent button on screen whose place on the page changed since it was last
 *  looked at. */
const onScreenIfMoved = new Set<() => void>();

/** Whether a consent button is on screen: the chat then keeps its place instead of
 *  following what streams in below, which would move the button under the cursor and
 *  keep re-arming it (another call's progress, every 100 ms). */
export function consentOnScreen(): boolean {
  return onScreen.size > 0;
}

/**
 * Every consent button on screen ignores clicks for ARM_MS again: the prompts moved (one
 * appeared or went, or a view entered or left full screen), so what is under the cursor
 * now may not be what the user aimed at.
 */
export function rearmConsent(): void {
  for (const arm of onScreen) arm();
}

/**
 * Each frame while consent buttons are on screen, those that moved ignore clicks for
 * ARM_MS again: anything above them may change its height at a time a server picks (a
 * view resizing, another call's progress coming and going, a result or a view arriving),
 * and none of it asks first. Those that stayed where they were keep taking clicks: what
 * changes below them (the chat keeps its place while one is on screen: `consentOnScreen`)
 * or off screen cannot keep them disabled. What moves them every half second from above
 * can, and that fails safe: Deny (never armed) and Stop still answer.
 */
let watching: number | undefined;
function watchPlaces(): void {
  watching = undefined;
  if (onScreenIfMoved.size === 0 || typeof requestAnimationFrame !== "function") return;
  for (const armIfMoved of onScreenIfMoved) armIfMoved();
  watching = requestAnimationFrame(watchPlaces);
}

/**
 * `use:armedAfter` on a consent button: disabled, and marked `data-arming` (app.css dims it
 * and lets the pointer through, so a driver's click is refused rather than lost), for `ms`
 * after it mounts, again each time it comes into view, and whenever another consent button
 * comes or goes. A click that reaches it meanwhile (one a script dispatches) is dropped
 * before the button's own handler or its form sees it.
 */
export const armedAfter: Action<HTMLButtonElement, number | undefined> = (node, ms = ARM_MS) => {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = (): void => {
    clearTimeout(timer);
    node.disabled = true;
    node.dataset.arming = "";
    timer = setTimeout(() => {
      node.disabled = false;
      delete node.dataset.arming;
    }, ms);
  };
  const guard = (event: Event): void => {
    if (node.dataset.arming === undefined) return;
    event.preventDefault();
    event.stopImmediatePropagation();
  };
  node.addEventListener("click", guard, true);

  // Coming into view (scrolled to, or pushed there) counts as showing.
  let visible = false;
  const watch =
    typeof IntersectionObserver === "function"
      ? new IntersectionObserver((entries) => {
          for (const entry of entries) {
            if (entry.isIntersecting && !visible) arm();
            visible = entry.isIntersecting;
          }
        })
      : null;
  watch?.observe(node);

  // Where the button was when last looked at.
  let place = ((): { top: number; left: number } => {
    const rect = node.getBoundingClientRect();
    return { top: rect.top, left: rect.left };
  })();
  const armIfMoved = (): void => {
    const rect = node.getBoundingClientRect();
    if (rect.top !== place.top || rect.left !== place.left) arm();
    place = { top: rect.top, left: rect.left };
  };

  rearmConsent();
  onScreen.add(arm);
  onScreenIfMoved.add(armIfMoved);
  if (watching === undefined && typeof requestAnimationFrame === "function") {
    watching = requestAnimationFrame(watchPlaces);
  }
  arm();
  return {
    destroy() {
      onScreen.delete(arm);
      onScreenIfMoved.delete(armIfMoved);
      if (onScreenIfMoved.size === 0 && watching !== undefined) {
        cancelAnimationFrame(watching);
        watching = undefined;
      }
      clearTimeout(timer);
      watch?.disconnect();
      node.removeEventListener("click", guard, true);
      rearmConsent();
    },
  };
};
