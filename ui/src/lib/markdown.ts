// Turns untrusted markdown (model replies, tool output) into sanitized HTML for {@html}.
import DOMPurify from "dompurify";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import diff from "highlight.js/lib/languages/diff";
import go from "highlight.js/lib/languages/go";
import java from "highlight.js/lib/languages/java";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import markdown from "highlight.js/lib/languages/markdown";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import shell from "highlight.js/lib/languages/shell";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";
import { Marked, Tokenizer, type Tokens } from "marked";
import { escapeHtml } from "./escapeHtml";
import { MATHML_ATTRIBUTES, MATHML_TAGS, mathExtension, startMathRender } from "./math";
import { visible } from "./visibleText";

// The core build keeps the bundle small; each definition also brings its aliases
// (js, ts, py, rs, sh, html, yml, ...).
const languages = {
  bash, c, cpp, css, diff, go, java, javascript, json, markdown, python, rust, shell, sql,
  typescript, xml, yaml,
};
for (const [name, language] of Object.entries(languages)) hljs.registerLanguage(name, language);

export { escapeHtml };

/**
 * The longest code (in UTF-16 units) that is highlighted. highlight.js runs on the page's only
 * thread in time linear in the code's length (about 2-3 ms per KiB of JavaScript), and a
 * streaming answer is rendered whole every 100 ms: a longer block would freeze the window, so it
 * is shown as plain escaped code in the same block.
 */
export const MAX_HIGHLIGHTED_CODE = 64 * 1024;

/**
 * How long one render may spend finding emphasis and strikethrough. marked's emphasis
 * parsing is quadratic in crafted text (`"*a ".repeat(4000) + "a*"`, 12 KB, took 3 s here:
 * marked issue #4099), and a streaming answer is rendered every 100 ms on the page's only
 * thread. Past the budget the rest of the message's `*`, `_` and `~` are shown as written.
 * Only the time marked spends on them counts: 62 KB of ordinary text with 2,000 emphases
 * spends a few milliseconds there.
 */
export const EMPHASIS_BUDGET_MS = 50;

/** What the render under way has spent: on emphasis (ms), and the code it highlighted. */
const rendering = { emphasis: 0, highlighted: 0 };

/** marked's own emphasis or strikethrough tokenizer, timed against the render's budget;
 * past it, `undefined` ("no emphasis here": `false` would hand over to marked's own). */
function timed<A extends unknown[], T>(
  tokenize: (this: Tokenizer, ...args: A) => T,
): (this: Tokenizer, ...args: A) => T | undefined {
  return function (this: Tokenizer, ...args: A) {
    if (rendering.emphasis > EMPHASIS_BUDGET_MS) return undefined;
    const started = performance.now();
    try {
      return tokenize.apply(this, args);
    } finally {
      rendering.emphasis += performance.now() - started;
    }
  };
}

function renderCode({ text: written, lang }: Tokens.Code): string {
  // What hides or rearranges text is shown as its code: a bidi override can make a line
  // read as commented out on screen while Copy gives a terminal the command it hides.
  const text = visible(written, { keepLines: true });
  const fence = (lang ?? "").match(/^\S*/)?.[0] ?? "";
  const known = fence !== "" && hljs.getLanguage(fence) !== undefined;
  // The cap is on a message's code together: eight blocks just under it took seconds.
  const highlighted = known && rendering.highlighted + text.length <= MAX_HIGHLIGHTED_CODE;
  if (highlighted) rendering.highlighted += text.length;
  const body = highlighted
    ? hljs.highlight(text, { language: fence, ignoreIllegals: true }).value
    : escapeHtml(text);
  const codeClass = known ? `hljs language-${escapeHtml(fence.toLowerCase())}` : "hljs";
  return (
    `<div class="code-block"><div class="code-head"><span>${escapeHtml(fence || "text")}</span>` +
    `<button type="button" class="copy-code" aria-label="Copy code">Copy</button></div>` +
    `<pre><code class="${codeClass}">${body}</code></pre></div>\n`
  );
}

/** Whether `tokens`, or any token inside them, is a formula. */
function holdsFormula(tokens: Tokens.Generic[]): boolean {
  return tokens.some((token) => token.type === "inlineMath" || (Array.isArray(token.tokens) && holdsFormula(token.tokens)));
}

const marked = new Marked({
  gfm: true,
  tokenizer: {
    emStrong: timed(Tokenizer.prototype.emStrong),
    del: timed(Tokenizer.prototype.del),
  },
  renderer: {
    code: renderCode,
    // Raw HTML from a model is shown as the text it is, never parsed into elements.
    html: ({ text, block }) =>
      block ? `<p class="raw-html">${escapeHtml(text)}</p>` : escapeHtml(text),
    // A remote image would be fetched as soon as it renders, telling a third party the chat is open.
    image({ text, tokens }) {
      // A formula in the alt text would come back drawn, as markup: the text is shown as written.
      const plain = tokens && !holdsFormula(tokens);
      return escapeHtml(plain ? this.parser.parseInline(tokens, this.parser.textRenderer) : text);
    },
    // Task lists would otherwise need <input>, which the sanitizer drops.
    checkbox: ({ checked }) => (checked ? "☑ " : "☐ "),
  },
});
marked.use(mathExtension);

// A private instance, so these hooks and settings don't leak into any other DOMPurify user.
const purifier = DOMPurify(window);

const MATHML = "http://www.w3.org/1998/Math/MathML";
const HTML_ATTRIBUTES = new Set(["align", "aria-label", "class", "href", "start", "title", "type"]);
const MATH_ATTRIBUTES = new Set(MATHML_ATTRIBUTES);

// Each namespace its own attributes: no `href` on a MathML element (WebKit would make it a
// link the hook below never sees), no MathML attribute on an HTML one.
purifier.addHook("uponSanitizeAttribute", (node, data) => {
  const allowed = node.namespaceURI === MATHML ? MATH_ATTRIBUTES : HTML_ATTRIBUTES;
  if (!allowed.has(data.attrName)) data.keepAttr = false;
});

purifier.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName !== "A") return;
  node.removeAttribute("target");
  node.setAttribute("rel", "noopener noreferrer");
  const href = node.getAttribute("href");
  // This hook runs after attribute filtering, so href has passed ALLOWED_URI_REGEXP and the
  // attribute added here is not dropped by ALLOW_DATA_ATTR: false.
  if (href) node.setAttribute("data-external-link", href);
});

// An allowlist of what the renderer above emits: anything else (script, iframe, img, svg, form, ...)
// can only come from an escaping bug, and is dropped. Formulas add KaTeX's MathML (math.ts).
const purifyConfig = {
  ALLOWED_TAGS: [
    "a", "blockquote", "br", "button", "code", "del", "div", "em", "h1", "h2", "h3", "h4", "h5",
    "h6", "hr", "li", "ol", "p", "pre", "span", "strong", "table", "tbody", "td", "th", "thead",
    "tr", "ul", ...MATHML_TAGS,
  ],
  ALLOWED_ATTR: [...HTML_ATTRIBUTES, ...MATHML_ATTRIBUTES],
  ALLOW_DATA_ATTR: false,
  // DOMPurify tests every attribute not marked URI-safe against ALLOWED_URI_REGEXP; marking these
  // leaves href as the only one it applies to.
  ADD_URI_SAFE_ATTR: ["align", "start", "type", ...MATHML_ATTRIBUTES],
  ALLOWED_URI_REGEXP: /^(?:https?|mailto):/i,
};

/**
 * The deepest nesting of blockquotes and lists that is rendered as Markdown. marked recurses
 * once per level: a few thousand levels overflow the stack, and a few hundred already cost
 * seconds and gigabytes, while real replies nest a handful of levels.
 */
export const MAX_NESTING = 64;

/** A list marker (`-`, `*`, `+`, `1.`, `1)`) ends where whitespace or the line does. */
const LIST_MARKER = /^(?:[-*+]|\d{1,9}[.)])(?=[ \t]|$)/;

/**
 * How many blockquote and list levels a line opens: its leading `>` and list markers, plus
 * a level for every two columns of indentation before the first (how nested lists indent).
 */
export function lineNesting(line: string): number {
  let levels = 0;
  let position = 0;
  let indentation = 0;
  for (;;) {
    const start = position;
    while (line[position] === " " || line[position] === "\t") position += 1;
    if (levels === 0) indentation = line.slice(start, position).replace(/\t/g, "    ").length;
    if (line[position] === ">") {
      position += 1;
    } else {
      const marker = LIST_MARKER.exec(line.slice(position, position + 11));
      if (!marker) break;
      position += marker[0].length;
    }
    levels += 1;
  }
  return levels === 0 ? 0 : levels + Math.floor(indentation / 2);
}

function nestsTooDeep(text: string): boolean {
  return text.split("\n").some((line) => lineNesting(line) > MAX_NESTING);
}

/** The text as it is, escaped, keeping its whitespace: what is shown when Markdown is not. */
function plainText(text: string): string {
  return `<pre class="plain-text">${escapeHtml(text)}</pre>`;
}

/**
 * Sanitized HTML for `text`; never throws, since a message that cannot be rendered must still
 * be shown (and must not take the conversation's other messages down with it). Text nested
 * deeper than MAX_NESTING, or that marked fails on, is shown as plain text.
 */
export function renderMarkdown(text: string): string {
  if (nestsTooDeep(text)) return plainText(text);
  rendering.emphasis = 0;
  rendering.highlighted = 0;
  startMathRender();
  try {
    const html = marked.parse(text, { async: false });
    return purifier.sanitize(html, purifyConfig);
  } catch {
    return plainText(text);
  }
}
