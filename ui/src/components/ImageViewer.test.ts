import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import ImageViewer from "./ImageViewer.svelte";

const frame = { src: "data:image/png;base64,AAAA", mime: "image/png" };

// The test's DOM has no ResizeObserver (the viewer's size bindings use one).
globalThis.ResizeObserver ??= class {
  observe(): void {}
  unobserve(): void {}
  disconnect(): void {}
};

describe("ImageViewer", () => {
  it("keeps Tab inside, closes on Escape and gives the keyboard back to what opened it", async () => {
    const opener = document.createElement("button");
    opener.textContent = "Open the frame";
    document.body.append(opener);
    opener.focus();
    const onClose = vi.fn();
    const viewer = render(ImageViewer, { images: [frame, frame], onClose });
    const dialog = screen.getByRole("dialog", { name: "Image viewer" });
    expect(document.activeElement).toBe(dialog);

    const close = screen.getByRole("button", { name: "Close image" });
    close.focus();
    await fireEvent.keyDown(close, { key: "Tab" });
    expect(document.activeElement).toBe(screen.getByRole("button", { name: "Previous image" }));
    await fireEvent.keyDown(document.activeElement as HTMLElement, { key: "Tab", shiftKey: true });
    expect(document.activeElement).toBe(close);

    await fireEvent.keyDown(dialog, { key: "Escape" });
    expect(onClose).toHaveBeenCalledTimes(1);
    viewer.unmount();
    expect(document.activeElement).toBe(opener);
    opener.remove();
  });

  it("steps between images with Left and Right, which pan a single image instead", async () => {
    render(ImageViewer, { images: [frame, frame], onClose: () => {} });
    const dialog = screen.getByRole("dialog", { name: "Image viewer" });
    expect(screen.getByLabelText("Image position").textContent).toBe("1 of 2");
    await fireEvent.keyDown(dialog, { key: "ArrowRight" });
    expect(screen.getByLabelText("Image position").textContent).toBe("2 of 2");
    await fireEvent.keyDown(dialog, { key: "PageDown" });
    expect(screen.getByLabelText("Image position").textContent).toBe("2 of 2");
  });
});
