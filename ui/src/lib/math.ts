// Math in replies: `$…$`, `$$…$$`, `\(…\)` and `\[…\]` as MathML that KaTeX writes and the
// webview draws itself (WebKit renders MathML: no fonts or style sheets are shipped).
import katex from "katex";
import type { MarkedExtension, Tokens } from "marked";
import { escapeHtml } from "./escapeHtml";

/** The longest formula (in UTF-16 units) that is drawn; a longer one is shown as written.
 *  KaTeX's time grows with a formula's size, and a streaming answer is drawn every 100 ms. */
export const MAX_MATH = 4000;

/** How many drawn formulas are kept: a streaming answer draws the same ones again and
 *  again, and a long conversation holds a few hundred. */
const KEPT_DRAWINGS = 500;
const drawings = new Map<string, string | null>();

/**
 * `tex` as MathML (in KaTeX's `katex` span), or null when it is no formula KaTeX draws (a
 * formula still streaming, a typo): it is then shown as written. Nothing a formula says
 * reaches the page as a link or a style: `trust` is off, so `\href`, `\url`, `\htmlClass`
 * and `\includegraphics` draw as errors, and macro expansion is bounded.
 */
export function mathMl(tex: string, display: boolean): string | null {
  const key = `${display ? "D" : "I"}${tex}`;
  const kept = drawings.get(key);
  if (kept !== undefined) return kept;
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

const inlineMath = {
  name: "inlineMath",
  level: "inline" as const,
  start(src: string): number | undefined {
    const at = src.search(MAY_OPEN);
    return at === -1 ? undefined : at;
  },
  tokenizer(src: string): MathToken | undefined {
    const opening = OPENINGS.find(([open]) => src.startsWith(open));
    if (!opening) return undefined;
    const [open, close, display] = opening;
    const lineEnd = src.indexOf("\n");
    const line = lineEnd === -1 ? src : src.slice(0, lineEnd);
    const at = closing(line, open, close);
    if (at === -1) return undefined;
    const raw = line.slice(0, at + close.length);
    return { type: "inlineMath", raw, tex: line.slice(open.length, at).trim(), display };
  },
  renderer(token: Tokens.Generic): string {
    const { tex, display, raw } = token as MathToken;
    return drawnOrWritten(tex, display, raw);
  },
};

/** A formula on lines of its own: `$$` or `\[` alone on the first line, `$$` or `\]` alone
 *  on the last. */
const blockMath = {
  name: "blockMath",
  level: "block" as const,
  tokenizer(src: string): MathToken | undefined {
    const opening = src.startsWith("$$\n") ? ["$$", "$$"] : src.startsWith("\\[\n") ? ["\\[", "\\]"] : null;
    if (!opening) return undefined;
    const [open, close] = opening as [string, string];
    const end = src.indexOf(`\n${close}`, open.length);
    if (end === -1 || end - open.length > MAX_MATH) return undefined;
    const after = src.slice(end + 1 + close.length).match(/^[ \t]*(?:\n|$)/);
    if (!after) return undefined;
    const raw = src.slice(0, end + 1 + close.length + after[0].length);
    return { type: "blockMath", raw, tex: src.slice(open.length + 1, end).trim(), display: true };
  },
  renderer(token: Tokens.Generic): string {
    const { tex, raw } = token as MathToken;
    return `<p>${drawnOrWritten(tex, true, raw.trimEnd())}</p>\n`;
  },
};

function drawnOrWritten(tex: string, display: boolean, raw: string): string {
  const drawn = tex === "" ? null : mathMl(tex, display);
  return drawn ?? `<span class="math-source">${escapeHtml(raw)}</span>`;
}

/** The marked extension that finds formulas before any other inline rule reads them. */
export const mathExtension: MarkedExtension = { extensions: [blockMath, inlineMath] };

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
  "mathsize", "form", "mathcolor",
];
