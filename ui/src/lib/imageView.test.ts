import { describe, expect, it } from "vitest";
import {
  ARROW_PAN,
  MAX_SCALE,
  clampScroll,
  fitScale,
  layout,
  panKey,
  shownSize,
  stepIndex,
  stepScale,
  thumbnailWidth,
  trappedTab,
  zoomAround,
} from "./imageView";

describe("shownSize", () => {
  it("keeps the aspect ratio when scaling a wide frame to the card", () => {
    const size = shownSize({ width: 1600, height: 1000 }, 740, 480);
    expect(size.width).toBeCloseTo(740 * 1, 5);
    expect(size.width / size.height).toBeCloseTo(1.6, 5);
  });

  it("fits a tall screenshot by its height", () => {
    const size = shownSize({ width: 800, height: 3000 }, 740, 480);
    expect(size.height).toBe(480);
    expect(size.width).toBeCloseTo(128, 5);
  });

  it("shows a small image at its own size", () => {
    expect(shownSize({ width: 120, height: 80 }, 740, 480)).toEqual({ width: 120, height: 80 });
  });

  it("gives nothing for an image without a size", () => {
    expect(shownSize({ width: 0, height: 10 }, 740, 480)).toEqual({ width: 0, height: 0 });
  });
});

describe("thumbnailWidth", () => {
  it("picks the smallest allowed width covering the shown width times the pixel ratio", () => {
    expect(thumbnailWidth(740, 1, 1600)).toBe(1024);
    expect(thumbnailWidth(740, 2, 4000)).toBe(1600);
    expect(thumbnailWidth(480, 1, 4000)).toBe(512);
    expect(thumbnailWidth(128, 1, 800)).toBe(256);
    expect(thumbnailWidth(200, 1.5, 4000)).toBe(512);
  });

  it("uses the original when it is no wider than needed (never an upscale)", () => {
    expect(thumbnailWidth(740, 2, 1600)).toBeNull();
    expect(thumbnailWidth(120, 1, 120)).toBeNull();
    expect(thumbnailWidth(740, 1, 900)).toBeNull();
  });

  it("uses the original when no thumbnail is wide enough", () => {
    expect(thumbnailWidth(1400, 2, 6000)).toBeNull();
  });

  it("treats a pixel ratio below one as one", () => {
    expect(thumbnailWidth(300, 0.5, 4000)).toBe(512);
  });
});

describe("viewer math", () => {
  const window = { width: 1200, height: 750 };

  it("fits a large image to the window and never enlarges a small one", () => {
    expect(fitScale({ width: 4000, height: 4000 }, window)).toBeCloseTo(750 / 4000, 5);
    expect(fitScale({ width: 1600, height: 1000 }, window)).toBeCloseTo(0.75, 5);
    expect(fitScale({ width: 100, height: 50 }, window)).toBe(1);
  });

  it("centres an image smaller than the window and lays a larger one from the origin", () => {
    const small = layout({ width: 100, height: 50 }, window, 1);
    expect(small).toMatchObject({ contentWidth: 1200, contentHeight: 750, left: 550, top: 350 });
    const large = layout({ width: 4000, height: 4000 }, window, 1);
    expect(large).toMatchObject({ contentWidth: 4000, contentHeight: 4000, left: 0, top: 0 });
  });

  it("keeps the point under the pointer in place when zooming", () => {
    const image = { width: 4000, height: 4000 };
    const from = fitScale(image, window);
    const pointer = { x: 700, y: 300 };
    const before = layout(image, window, from);
    const imageX = (0 + pointer.x - before.left) / from;
    const imageY = (0 + pointer.y - before.top) / from;
    const scroll = zoomAround(image, window, from, 1, { x: 0, y: 0 }, pointer);
    const after = layout(image, window, 1);
    expect((scroll.x + pointer.x - after.left) / 1).toBeCloseTo(imageX, 5);
    expect((scroll.y + pointer.y - after.top) / 1).toBeCloseTo(imageY, 5);
  });

  it("keeps the scroll inside the content so every edge stays reachable", () => {
    const at = layout({ width: 4000, height: 4000 }, window, 1);
    expect(clampScroll({ x: -5, y: 99999 }, at, window)).toEqual({ x: 0, y: 4000 - 750 });
    const image = { width: 4000, height: 4000 };
    // Zooming out around a corner never leaves the scroll beyond the content.
    const scroll = zoomAround(image, window, 1, 0.1, { x: 2800, y: 3250 }, { x: 1200, y: 750 });
    expect(scroll).toEqual({ x: 0, y: 0 });
  });

  it("steps zoom within bounds", () => {
    expect(stepScale(1, 1)).toBe(1.25);
    expect(stepScale(1.25, -1)).toBe(1);
    expect(stepScale(MAX_SCALE, 1)).toBe(MAX_SCALE);
  });

  it("steps through images, wrapping around", () => {
    expect(stepIndex(0, 1, 3)).toBe(1);
    expect(stepIndex(2, 1, 3)).toBe(0);
    expect(stepIndex(0, -1, 3)).toBe(2);
    expect(stepIndex(0, 1, 0)).toBe(0);
  });
});

describe("the viewer's keyboard", () => {
  const view = { width: 1200, height: 800 };

  it("pans a tall screenshot by arrows, pages and its ends; Left and Right step images when there are several", () => {
    expect(panKey("ArrowDown", view, true)).toEqual({ x: 0, y: ARROW_PAN });
    expect(panKey("ArrowUp", view, true)).toEqual({ x: 0, y: -ARROW_PAN });
    expect(panKey("PageDown", view, true)).toEqual({ x: 0, y: 720 });
    expect(panKey(" ", view, true)).toEqual({ x: 0, y: 720 });
    expect(panKey("PageUp", view, true)).toEqual({ x: 0, y: -720 });
    expect(panKey("Home", view, true)).toEqual({ x: 0, y: -Infinity });
    expect(panKey("End", view, true)).toEqual({ x: 0, y: Infinity });
    expect(panKey("ArrowRight", view, true)).toBeNull();
    expect(panKey("ArrowRight", view, false)).toEqual({ x: ARROW_PAN, y: 0 });
    expect(panKey("ArrowLeft", view, false)).toEqual({ x: -ARROW_PAN, y: 0 });
    expect(panKey("a", view, false)).toBeNull();
  });

  it("keeps Tab inside the viewer: past the last control to the first, back past the first to the last", () => {
    expect(trappedTab(4, 5, false)).toBe(0);
    expect(trappedTab(2, 5, false)).toBeNull();
    expect(trappedTab(-1, 5, false)).toBe(0);
    expect(trappedTab(0, 5, true)).toBe(4);
    expect(trappedTab(-1, 5, true)).toBe(4);
    expect(trappedTab(3, 5, true)).toBeNull();
    expect(trappedTab(-1, 0, false)).toBeNull();
  });
});
