// The theme: follow the system (the default), or always light or dark. Kept in the
// webview's storage; applied as the `dark` class that Tailwind's dark variant reads.

export type Theme = "system" | "light" | "dark";

const KEY = "conduit-theme";
const query = (): MediaQueryList | null =>
  typeof matchMedia === "function" ? matchMedia("(prefers-color-scheme: dark)") : null;

export function savedTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  return saved === "light" || saved === "dark" ? saved : "system";
}

export function applyTheme(theme: Theme): void {
  const dark = theme === "dark" || (theme === "system" && (query()?.matches ?? false));
  document.documentElement.classList.toggle("dark", dark);
  document.documentElement.style.colorScheme = dark ? "dark" : "light";
}

export function setTheme(theme: Theme): void {
  localStorage.setItem(KEY, theme);
  applyTheme(theme);
}

/** Applies the saved theme and follows the system's changes while it is "system", and
 *  the choice made in another window (Settings is a window of its own: the storage event
 *  tells the chat window). */
export function startTheme(): void {
  applyTheme(savedTheme());
  query()?.addEventListener("change", () => applyTheme(savedTheme()));
  window.addEventListener("storage", (event) => {
    if (event.key === KEY || event.key === null) applyTheme(savedTheme());
  });
}
