// Image sizing for cards and the viewer's zoom/pan math: pure functions, no DOM.

import { THUMBNAIL_WIDTHS } from "./bindings";

export interface Size {
  width: number;
  height: number;
}

export interface Point {
  x: number;
  y: number;
}

/**
 * An image the viewer shows that is not stored: one the host draws on request (a waiting
 * sampling request's), with no copy or save. Stored images are shown by their MediaRef.
 */
export interface DrawnImage {
  src: string;
  /** The format the image came in (what is drawn is a PNG of it). */
  mime: string;
}

/**
 * The size an image shows at in a box: its own size when it fits, else scaled down to fit
 * `maxWidth` × `maxHeight` keeping its aspect ratio; never scaled up.
 */
export function shownSize(natural: Size, maxWidth: number, maxHeight: number): Size {
  if (natural.width <= 0 || natural.height <= 0) return { width: 0, height: 0 };
  const scale = Math.min(1, maxWidth / natural.width, maxHeight / natural.height);
  return { width: natural.width * scale, height: natural.height * scale };
}

/**
 * Which thumbnail to load for an image shown `shownWidth` CSS pixels wide on a screen with
 * `pixelRatio` device pixels per CSS pixel: the smallest allowed width that covers it, or
 * `null` for the original (it is no wider than needed, or no thumbnail is wide enough).
 */
export function thumbnailWidth(shownWidth: number, pixelRatio: number, naturalWidth: number): number | null {
  const needed = Math.ceil(shownWidth * Math.max(1, pixelRatio));
  if (naturalWidth <= needed) return null;
  const width = THUMBNAIL_WIDTHS.find((w) => w >= needed);
  return width === undefined || width >= naturalWidth ? null : width;
}

export const MIN_SCALE = 0.02;
export const MAX_SCALE = 8;
export const ZOOM_STEP = 1.25;

export function clampScale(scale: number): number {
  return Math.min(MAX_SCALE, Math.max(MIN_SCALE, scale));
}

/** The scale that shows the whole image in the viewport; never above 100 %. */
export function fitScale(image: Size, viewport: Size): number {
  if (image.width <= 0 || image.height <= 0 || viewport.width <= 0 || viewport.height <= 0) return 1;
  return clampScale(Math.min(1, viewport.width / image.width, viewport.height / image.height));
}

/** The next zoom step in (`direction` 1) or out (-1) from `scale`. */
export function stepScale(scale: number, direction: 1 | -1): number {
  return clampScale(direction > 0 ? scale * ZOOM_STEP : scale / ZOOM_STEP);
}

/**
 * Where the image sits in the viewer's scrolled content at `scale`: the content is at
 * least the viewport (so a small image is centred) and exactly the image where it is
 * larger, so every edge of the image can be scrolled to.
 */
export interface Layout {
  contentWidth: number;
  contentHeight: number;
  left: number;
  top: number;
  width: number;
  height: number;
}

export function layout(image: Size, viewport: Size, scale: number): Layout {
  const width = image.width * scale;
  const height = image.height * scale;
  const contentWidth = Math.max(viewport.width, width);
  const contentHeight = Math.max(viewport.height, height);
  return {
    contentWidth,
    contentHeight,
    left: (contentWidth - width) / 2,
    top: (contentHeight - height) / 2,
    width,
    height,
  };
}

/** A scroll position kept inside the content. */
export function clampScroll(scroll: Point, at: Layout, viewport: Size): Point {
  return {
    x: Math.min(Math.max(0, scroll.x), Math.max(0, at.contentWidth - viewport.width)),
    y: Math.min(Math.max(0, scroll.y), Math.max(0, at.contentHeight - viewport.height)),
  };
}

/**
 * The scroll position after zooming from `from` to `to` so that the image point under
 * `pointer` (relative to the viewport's top-left) stays under it.
 */
export function zoomAround(
  image: Size,
  viewport: Size,
  from: number,
  to: number,
  scroll: Point,
  pointer: Point,
): Point {
  const before = layout(image, viewport, from);
  const after = layout(image, viewport, to);
  const imageX = (scroll.x + pointer.x - before.left) / from;
  const imageY = (scroll.y + pointer.y - before.top) / from;
  return clampScroll(
    { x: imageX * to + after.left - pointer.x, y: imageY * to + after.top - pointer.y },
    after,
    viewport,
  );
}

/** The index `step` away from `index` among `count` images, wrapping around. */
export function stepIndex(index: number, step: 1 | -1, count: number): number {
  if (count <= 0) return 0;
  return (((index + step) % count) + count) % count;
}

/** How far one arrow key pans a zoomed image, in pixels. */
export const ARROW_PAN = 80;

/**
 * How far a key pans the image area of `viewport` size, or null when the key does not pan:
 * Up and Down (and Left and Right, when they do not step between images) by a little,
 * Page Up and Page Down by most of the view (a tall screenshot read from the keyboard),
 * Home and End to the top and the bottom.
 */
export function panKey(key: string, viewport: Size, arrowsStep: boolean): Point | null {
  const page = Math.max(ARROW_PAN, viewport.height * 0.9);
  switch (key) {
    case "ArrowUp":
      return { x: 0, y: -ARROW_PAN };
    case "ArrowDown":
      return { x: 0, y: ARROW_PAN };
    case "ArrowLeft":
      return arrowsStep ? null : { x: -ARROW_PAN, y: 0 };
    case "ArrowRight":
      return arrowsStep ? null : { x: ARROW_PAN, y: 0 };
    case "PageUp":
      return { x: 0, y: -page };
    case "PageDown":
    case " ":
      return { x: 0, y: page };
    case "Home":
      return { x: 0, y: -Infinity };
    case "End":
      return { x: 0, y: Infinity };
    default:
      return null;
  }
}

/**
 * Where Tab moves the focus inside a modal dialog of `count` focusable controls: from the
 * last to the first (from the first to the last going back), so it never leaves the
 * dialog for the page behind it. `at` is the focused control's place, -1 for none of them
 * (the dialog itself). Null: the browser's own move stays within the dialog.
 */
export function trappedTab(at: number, count: number, backwards: boolean): number | null {
  if (count === 0) return null;
  if (backwards) return at <= 0 ? count - 1 : null;
  return at === count - 1 || at === -1 ? 0 : null;
}
