import { afterEach, describe, expect, it } from "vitest";
import { escapeHtml, renderMarkdown } from "./markdown";

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

describe("escapeHtml", () => {
  it("escapes the five significant characters", () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe(
      "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;",
    );
  });
});
