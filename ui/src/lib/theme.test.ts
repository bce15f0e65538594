// The theme follows the choice made in another window (Settings is a window of its own).
import { afterEach, describe, expect, it } from "vitest";
import { startTheme } from "./theme";

describe("the theme", () => {
  afterEach(() => {
    localStorage.clear();
    document.documentElement.classList.remove("dark");
  });

  it("follows the choice another window saved", () => {
    localStorage.setItem("conduit-theme", "light");
    startTheme();
    expect(document.documentElement.classList.contains("dark")).toBe(false);
    // Settings saves "dark" in the storage both windows share; this window hears of it.
    localStorage.setItem("conduit-theme", "dark");
    window.dispatchEvent(new StorageEvent("storage", { key: "conduit-theme", newValue: "dark" }));
    expect(document.documentElement.classList.contains("dark")).toBe(true);
    expect(document.documentElement.style.colorScheme).toBe("dark");
    // Another key changes nothing.
    localStorage.setItem("conduit-theme", "light");
    window.dispatchEvent(new StorageEvent("storage", { key: "something-else" }));
    expect(document.documentElement.classList.contains("dark")).toBe(true);
  });
});
