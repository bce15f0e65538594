// Consent buttons that ignore clicks until they have been in place ARM_MS: a view or a server
// cannot make one appear, or slide, under a click the user aimed at something else.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ARM_MS, armedAfter, rearmConsent } from "./consent";

/** A consent button on the page, armed by the action, counting the clicks it takes. */
function consentButton(): { button: HTMLButtonElement; clicks: () => number; destroy: () => void } {
  const button = document.createElement("button");
  button.textContent = "Send";
  let clicks = 0;
  button.addEventListener("click", () => (clicks += 1));
  document.body.append(button);
  const action = armedAfter(button);
  return {
    button,
    clicks: () => clicks,
    destroy: () => {
      action?.destroy?.();
      button.remove();
    },
  };
}

/** A click as a script (or a double-click's second half) would dispatch it. */
function click(button: HTMLButtonElement): void {
  button.dispatchEvent(new MouseEvent("click", { bubbles: true, cancelable: true }));
}

describe("a consent button", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
    vi.unstubAllGlobals();
    document.body.innerHTML = "";
  });

  it("ignores clicks for 500 ms after it shows, and shows that it does", () => {
    expect(ARM_MS).toBe(500);
    const { button, clicks, destroy } = consentButton();
    expect(button.disabled).toBe(true);
    expect(button.dataset.arming).toBe("");
    click(button);
    button.click();
    vi.advanceTimersByTime(ARM_MS - 1);
    click(button);
    expect(clicks()).toBe(0);
    vi.advanceTimersByTime(1);
    expect(button.disabled).toBe(false);
    expect(button.dataset.arming).toBeUndefined();
    click(button);
    expect(clicks()).toBe(1);
    destroy();
  });

  it("does not submit its form while it ignores clicks", () => {
    const form = document.createElement("form");
    const submitted = vi.fn((event: Event) => event.preventDefault());
    form.addEventListener("submit", submitted);
    const button = document.createElement("button");
    button.type = "submit";
    form.append(button);
    document.body.append(form);
    const action = armedAfter(button);
    click(button);
    button.click();
    expect(submitted).not.toHaveBeenCalled();
    vi.advanceTimersByTime(ARM_MS);
    click(button);
    expect(submitted).toHaveBeenCalledTimes(1);
    action?.destroy?.();
  });

  it("ignores clicks again when another prompt's button shows or goes", () => {
    const first = consentButton();
    vi.advanceTimersByTime(ARM_MS);
    expect(first.button.disabled).toBe(false);
    // A second prompt shows above it: the first one's button may have moved.
    const second = consentButton();
    expect(first.button.disabled).toBe(true);
    vi.advanceTimersByTime(ARM_MS);
    expect(first.button.disabled).toBe(false);
    // It goes: what was below it slides up, under the cursor.
    second.destroy();
    expect(first.button.disabled).toBe(true);
    click(first.button);
    expect(first.clicks()).toBe(0);
    vi.advanceTimersByTime(ARM_MS);
    rearmConsent();
    expect(first.button.disabled).toBe(true);
    vi.advanceTimersByTime(ARM_MS);
    click(first.button);
    expect(first.clicks()).toBe(1);
    first.destroy();
  });

  it("ignores clicks again once it moves, whatever moved it, and not while it stays put", () => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "requestAnimationFrame"] });
    const button = document.createElement("button");
    let top = 400;
    button.getBoundingClientRect = () => ({ top, left: 20 }) as DOMRect;
    let clicks = 0;
    button.addEventListener("click", () => (clicks += 1));
    document.body.append(button);
    const action = armedAfter(button);
    vi.advanceTimersByTime(ARM_MS + 50);
    expect(button.disabled).toBe(false);
    // Another call's progress goes away above it (nothing the page announces): the next
    // frame finds it moved, and a click that lands then is not taken.
    top = 340;
    vi.advanceTimersByTime(20);
    expect(button.disabled).toBe(true);
    click(button);
    expect(clicks).toBe(0);
    // In place, it takes clicks again after the pause, frame after frame.
    vi.advanceTimersByTime(ARM_MS + 200);
    expect(button.disabled).toBe(false);
    click(button);
    expect(clicks).toBe(1);
    action?.destroy?.();
  });

  it("ignores clicks again for 500 ms once it comes into view", () => {
    let report: (visible: boolean) => void = () => {};
    vi.stubGlobal(
      "IntersectionObserver",
      class {
        constructor(callback: (entries: Array<{ isIntersecting: boolean }>) => void) {
          report = (visible) => callback([{ isIntersecting: visible }]);
        }
        observe(): void {}
        disconnect(): void {}
      },
    );
    const { button, clicks, destroy } = consentButton();
    report(false);
    vi.advanceTimersByTime(ARM_MS);
    expect(button.disabled).toBe(false);
    // Scrolled (or pushed) into view.
    report(true);
    expect(button.disabled).toBe(true);
    click(button);
    vi.advanceTimersByTime(ARM_MS);
    click(button);
    expect(clicks()).toBe(1);
    destroy();
  });
});
