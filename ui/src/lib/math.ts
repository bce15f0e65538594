// Math in replies: `$…$`, `$$…$$`, `\(…\)` and `\[…\]` as MathML that KaTeX writes and the
// webview draws itself (WebKit renders MathML: no fonts or style sheets are shipped).
import katex from "katex";
import type { MarkedExtension, Tokens } from "marked";
import { escapeHtml } from "./escapeHtml";

/** The longest formula (in UTF-16 units) that is drawn; a longer one is shown as written.
 *  KaTeX's time grows with a formula's size, and a streaming answer is drawn every 100 ms. */
export const MAX_MATH = 4000;

/** How many drawn formulas are kept, the least recently used leaving first: a streaming
 *  answer draws the same ones again and again, and a long conversation holds hundreds. */
const KEPT_DRAWINGS = 2000;
const drawings = new Map<string, string | null>();

/** How long one render may spend finding formulas. A `$` is tried as an opening at most
 *  MAX_MATH characters ahead, but a line of thousands of `$` (`$1$1$1…`) tries thousands
 *  of openings, on every 100 ms render of a streaming answer; past the budget the rest of
 *  the message's formulas are shown as written. Drawing them (KaTeX) is not counted:
 *  each is drawn once and kept. */
export const MATH_BUDGET_MS = 30;

/** What the render under way has spent finding formulas (ms). */
const finding = { spent: 0 };

/** Starts a render's budget (`renderMarkdown` calls it). */
export function startMathRender(): void {
  finding.spent = 0;
}

/** `find` timed against the render's budget; past it, `undefined` (no formula here). */
function timed<A extends unknown[], T>(find: (...args: A) => T | undefined): (...args: A) => T | undefined {
  return (...args: A) => {
    if (finding.spent > MATH_BUDGET_MS) return undefined;
    const started = performance.now();
    try {
      return find(...args);
    } finally {
      finding.spent += performance.now() - started;
    }
  };
}

/**
 * `tex` as MathML (in KaTeX's `katex` span), or null when it is no formula KaTeX draws (a
 * formula still streaming, a typo): it is then shown as written. Nothing a formula says
 * reaches the page as a link or a style: `trust` is off, so `\href`, `\url`, `\htmlClass`
 * and `\includegraphics` draw as errors, and macro expansion is bounded.
 */
export function mathMl(tex: string, display: boolean): string | null {
  const key = `${display ? "D" : "I"}${tex}`;
  const kept = drawings.get(key);
  if (kept !== undefined) {
    // Used again: the last to leave.
    drawings.delete(key);
    drawings.set(key, kept);
    return kept;
  }
  let drawn: string | null;
  try {
    drawn = katex.renderToString(tex, {
      displayMode: display,
      output: "mathml",
      throwOnError: true,
      trust: false,
      strict: "ignore",
      maxExpand: 200,
      maxSize: 20,
    });
  } catch {
    drawn = null;
  }
  if (drawings.size >= KEPT_DRAWINGS) {
    const oldest = drawings.keys().next().value;
    if (oldest !== undefined) drawings.delete(oldest);
  }
  drawings.set(key, drawn);
  return drawn;
}

type MathToken = Tokens.Generic & { type: "inlineMath" | "blockMath"; tex: string; display: boolean };

/** Where a formula is closed on `line` (which starts with its `open`), or -1. A `$` formula
 *  follows Pandoc's rule, so prices are no math: `$5 and $10`. Linear in the line, and no
 *  further than MAX_MATH. */
function closing(line: string, open: string, close: string): number {
  const limit = Math.min(line.length, open.length + MAX_MATH + close.length);
  if (open === "$") {
    // Something right after the opening `$`, and nothing blank.
    if (line.length < 3 || /\s/.test(line[1] ?? " ")) return -1;
    for (let at = line.indexOf("$", 2); at !== -1 && at < limit; at = line.indexOf("$", at + 1)) {
      const before = line[at - 1] ?? " ";
      const after = line[at + 1] ?? "";
      if (!/\s/.test(before) && before !== "\\" && !/\d/.test(after)) return at;
    }
    return -1;
  }
  const at = line.indexOf(close, open.length);
  return at > open.length && at < limit ? at : -1;
}

const OPENINGS: ReadonlyArray<[string, string, boolean]> = [
  ["$$", "$$", true],
  ["$", "$", false],
  ["\\(", "\\)", false],
  ["\\[", "\\]", true],
];

/** The first place in `src` a formula may start: a `$` that is not escaped, `\(` or `\[`. */
const MAY_OPEN = /(?<!\\)\$|\\\(|\\\[/;

/** A formula at the start of `src`, on its first line: its source as written, its TeX
 *  and whether it is shown apart. */
function formulaAt(src: string): { raw: string; tex: string; display: boolean } | undefined {
  const opening = OPENINGS.find(([open]) => src.startsWith(open));
  if (!opening) return undefined;
  const [open, close, display] = opening;
  // Only as far as the longest formula: the rest of a long line is never read.
  const reach = src.slice(0, open.length + MAX_MATH + close.length + 1);
  const lineEnd = reach.indexOf("\n");
  const line = lineEnd === -1 ? reach : reach.slice(0, lineEnd);
  const at = closing(line, open, close);
  if (at === -1) return undefined;
  const tex = line.slice(open.length, at).trim();
  // `\[1\]` is Markdown's escaped brackets (a citation), not a formula.
  if (open === "\\[" && /^[\d\s,.–-]*$/.test(tex)) return undefined;
  return { raw: line.slice(0, at + close.length), tex, display };
}

/** Where the first formula in `src` at or after `from` starts, and what it is; undefined
 *  when there is none, or when the render's budget runs out while looking. Only a place
 *  where a formula does start is ever given to marked: a `$` that starts none (a price)
 *  does not cut the text there. */
function nextFormula(
  src: string,
  from: number,
): { start: number; formula: { raw: string; tex: string; display: boolean } } | undefined {
  if (finding.spent > MATH_BUDGET_MS) return undefined;
  const began = performance.now();
  const candidates = new RegExp(MAY_OPEN.source, "g");
  candidates.lastIndex = from;
  let tried = 0;
  try {
    for (let found = candidates.exec(src); found; found = candidates.exec(src)) {
      const formula = formulaAt(src.slice(found.index));
      if (formula) return { start: found.index, formula };
      tried += 1;
      if (tried % 64 === 0 && finding.spent + performance.now() - began > MATH_BUDGET_MS) return undefined;
    }
    return undefined;
  } finally {
    finding.spent += performance.now() - began;
  }
}

const inlineMath = {
  name: "inlineMath",
  level: "inline" as const,
  start(src: string): number | undefined {
    return nextFormula(src, 0)?.start;
  },
  tokenizer: timed((src: string): MathToken | undefined => {
    const found = formulaAt(src);
    return found && { type: "inlineMath", ...found };
  }),
  renderer(token: Tokens.Generic): string {
    const { tex, display, raw } = token as MathToken;
    return drawnOrWritten(tex, display, raw);
  },
};

/** Where a line of `$$` or `\[` alone starts in `src` (a formula on lines of its own may
 *  follow a paragraph's line directly). */
const BLOCK_OPENING = /(?:^|\n)[ \t]{0,3}(?:\$\$|\\\[)[ \t]*\n/;
const BLOCK_DOLLARS_END = /\n[ \t]{0,3}\$\$[ \t]*(?:\n|$)/;
const BLOCK_BRACKET_END = /\n[ \t]{0,3}\\\][ \t]*(?:\n|$)/;

/** A formula on lines of its own: `$$` or `\[` alone on the first line, `$$` or `\]` alone
 *  on the last, no blank line between (an unclosed `$$` must not swallow what follows). */
const blockMath = {
  name: "blockMath",
  level: "block" as const,
  start: timed((src: string): number | undefined => {
    const found = BLOCK_OPENING.exec(src);
    if (!found) return undefined;
    return found.index + (found[0].startsWith("\n") ? 1 : 0);
  }),
  tokenizer: timed((src: string): MathToken | undefined => {
    const first = /^[ \t]{0,3}(\$\$|\\\[)[ \t]*\n/.exec(src);
    if (!first) return undefined;
    const open = first[1] as "$$" | "\\[";
    const close = open === "$$" ? "$$" : "\\]";
    const reach = src.slice(0, first[0].length + MAX_MATH + close.length + 8);
    const ending = (close === "$$" ? BLOCK_DOLLARS_END : BLOCK_BRACKET_END).exec(reach.slice(first[0].length - 1));
    if (!ending) return undefined;
    const texEnd = first[0].length - 1 + ending.index;
    const tex = src.slice(first[0].length, texEnd);
    if (/\n[ \t]*\n/.test(tex) || tex.trim() === "") return undefined;
    const raw = src.slice(0, texEnd + ending[0].length);
    return { type: "blockMath", raw, tex: tex.trim(), display: true };
  }),
  renderer(token: Tokens.Generic): string {
    const { tex, raw } = token as MathToken;
    return `<p>${drawnOrWritten(tex, true, raw.trimEnd())}</p>\n`;
  },
};

function drawnOrWritten(tex: string, display: boolean, raw: string): string {
  const drawn = tex === "" ? null : mathMl(tex, display);
  return drawn ?? `<span class="math-source">${escapeHtml(raw)}</span>`;
}

/** `src` with each formula blanked out (same length), so that marked's emphasis never
 *  opens or closes inside one (`*the optimum $x^*$ here*`). */
function maskFormulas(src: string): string {
  let masked = "";
  let from = 0;
  for (let next = nextFormula(src, 0); next; next = nextFormula(src, from)) {
    masked += src.slice(from, next.start) + "a".repeat(next.formula.raw.length);
    from = next.start + next.formula.raw.length;
  }
  return masked + src.slice(from);
}

/** The marked extension that finds formulas before any other inline rule reads them. */
export const mathExtension: MarkedExtension = {
  extensions: [blockMath, inlineMath],
  hooks: { emStrongMask: maskFormulas },
};

/** What the sanitizer lets through of KaTeX's MathML: its elements (no `maction`,
 *  `annotation-xml` or `mglyph`, which can carry links, markup or images) and the
 *  presentation attributes it writes. */
export const MATHML_TAGS = [
  "math", "semantics", "annotation", "mrow", "mi", "mn", "mo", "ms", "mtext", "mspace", "msup",
  "msub", "msubsup", "mfrac", "msqrt", "mroot", "mstyle", "mpadded", "mphantom", "menclose",
  "mover", "munder", "munderover", "mtable", "mtr", "mtd", "mlabeledtr", "merror",
];

export const MATHML_ATTRIBUTES = [
  "display", "mathvariant", "stretchy", "fence", "separator", "lspace", "rspace", "accent",
  "accentunder", "columnalign", "columnlines", "columnspacing", "rowalign", "rowlines",
  "rowspacing", "displaystyle", "scriptlevel", "encoding", "width", "height", "depth", "voffset",
  "minsize", "maxsize", "movablelimits", "symmetric", "largeop", "linethickness", "notation",
  "mathsize", "form", "mathcolor", "mathbackground", "linebreak",
];
