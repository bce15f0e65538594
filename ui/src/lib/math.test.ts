import { describe, expect, it } from "vitest";
import { renderMarkdown } from "./markdown";
import { MAX_MATH } from "./math";

/** The element names of what `html` renders, in order. */
function tags(html: string): string[] {
  const box = document.createElement("div");
  box.innerHTML = html;
  return [...box.querySelectorAll("*")].map((element) => element.localName);
}

describe("math in replies", () => {
  it("draws $…$ and \\(…\\) in the line, $$…$$ and \\[…\\] apart, as MathML", () => {
    const html = renderMarkdown("Euler: $e^{i\\pi} + 1 = 0$ and \\(a^2 + b^2 = c^2\\).");
    expect(html.match(/<math/g)).toHaveLength(2);
    expect(html).toContain("<msup><mi>e</mi>");
    expect(html).not.toContain('display="block"');
    expect(html).toContain("Euler: ");

    const apart = renderMarkdown("The roots:\n\n$$\nx = \\frac{-b \\pm \\sqrt{b^2 - 4ac}}{2a}\n$$\n\nDone.");
    expect(apart).toContain('display="block"');
    expect(apart).toContain("<mfrac>");
    expect(apart).toContain("<msqrt>");
    expect(apart).toContain("Done.");
    const bracketed = renderMarkdown("\\[\n\\sum_{k=1}^{n} k = \\frac{n(n+1)}{2}\n\\]");
    expect(bracketed).toContain('display="block"');
    expect(bracketed).toContain("<munderover>");
    expect(renderMarkdown("So $$E = mc^2$$ holds.")).toContain('display="block"');
  });

  it("leaves prices, escaped dollars and code as written", () => {
    for (const text of ["It costs $5 and $10.", "Pay \\$20 now, \\$30 later", "Between $ 3 and 4 $ dollars"]) {
      expect(renderMarkdown(text)).not.toContain("<math");
    }
    expect(renderMarkdown("It costs $5 and $10.")).toContain("It costs $5 and $10.");
    expect(renderMarkdown("Pay \\$20 now")).toContain("Pay $20 now");
    const code = renderMarkdown("Run `echo $HOME and $PATH` first");
    expect(code).not.toContain("<math");
    expect(code).toContain("<code>echo $HOME and $PATH</code>");
  });

  it("shows a formula KaTeX cannot draw, or one too long, as written", () => {
    const broken = renderMarkdown("Half a formula: $\\frac{1}{$ so far");
    expect(broken).not.toContain("<math");
    expect(broken).toContain('<span class="math-source">$\\frac{1}{$</span>');
    const long = `$${"x+".repeat(MAX_MATH)}x$`;
    expect(renderMarkdown(long)).not.toContain("<math");
  });

  it("draws what a formula cannot make into a link or markup as text", () => {
    const html = renderMarkdown(
      "$\\href{javascript:alert(1)}{x}$ $\\url{https://example.com}$ $\\text{<img src=x onerror=alert(1)>}$",
    );
    const box = document.createElement("div");
    box.innerHTML = html;
    const attributes = [...box.querySelectorAll("*")].flatMap((element) => element.getAttributeNames());
    expect(attributes.filter((name) => /^(href|src|xlink:href|on)/.test(name))).toEqual([]);
    expect(tags(html)).not.toContain("img");
    expect(tags(html)).not.toContain("a");
    expect(html.match(/<math/g)).toHaveLength(3);
    expect(html).toContain("<mtext>&lt;img&nbsp;src=x&nbsp;onerror=alert(1)&gt;</mtext>");
  });

  it("keeps only KaTeX's MathML: a hostile reply cannot bring its own", () => {
    const html = renderMarkdown('<math><maction actiontype="statusline"><mtext>x</mtext><mtext>y</mtext></maction></math>');
    expect(tags(html)).not.toContain("math");
    expect(html).toContain("&lt;math&gt;");
  });

  it("draws every formula of a long answer, and the same again when it renders again", () => {
    const answer = Array.from({ length: 300 }, (_, n) => `Step ${n}: $x_{${n}} = \\frac{${n}}{${n + 1}}$ and $$\\int_0^{${n}} t\\,dt$$`).join("\n\n");
    const html = renderMarkdown(answer);
    expect(html.match(/<math/g)).toHaveLength(600);
    expect(renderMarkdown(answer)).toBe(html);
  });

  it("draws a formula on lines of its own right after a line of text, in a list too", () => {
    const html = renderMarkdown("The energy is:\n$$\nE = mc^2\n$$\nwhere c is light's speed.");
    expect(html).toContain('display="block"');
    expect(html).toContain("The energy is:");
    expect(html).toContain("where c is light");
    const listed = renderMarkdown("1. First:\n   $$\n   a^2\n   $$\n2. Second");
    expect(listed).toContain('display="block"');
    expect(listed).toContain("Second");
  });

  it("never lets an unclosed $$ swallow what follows", () => {
    const html = renderMarkdown("$$\nx = 1\n\n## Next\n\n```\ncode\n```\n\n$$\n");
    expect(html).toContain("<h2>Next</h2>");
    expect(html).toContain("code");
  });

  it("keeps emphasis outside formulas, and an image's alt text as written", () => {
    const html = renderMarkdown("*the optimum $x^*$ here*");
    expect(html).toMatch(/^<p><em>the optimum <span class="katex"><math>.*<\/math><\/span> here<\/em><\/p>/);
    const image = renderMarkdown("![plot of $y = x^2$](https://example.com/p.png)");
    expect(image).not.toContain("<math");
    expect(image).toContain("plot of $y = x^2$");
    expect(renderMarkdown("![*the $x$ axis*](https://example.com/p.png)")).not.toContain("<math");
  });

  it("leaves escaped brackets as brackets", () => {
    expect(renderMarkdown("As shown \\[1\\] and \\[2, 3\\].")).not.toContain("<math");
  });

  it("stops finding formulas past the render's budget instead of freezing the window", () => {
    const line = "$1".repeat(30_000);
    const html = renderMarkdown(`${line}\n\nThen $x^2$.`);
    expect(html).toContain("$1$1$1");
  });
});

