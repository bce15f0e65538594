import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import * as api from "../lib/api";
import type { ApiMock } from "../lib/apiMock";
import ImageActions from "./ImageActions.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
const mocked = api as unknown as ApiMock;

const frame = { hash: "c".repeat(64), mime: "image/png", bytes: 40_000, width: 1600, height: 1000 };

describe("ImageActions", () => {
  it("says why an image was not copied or saved, in the host's words", async () => {
    // Commands reject with the host's error object, which read "[object Object]".
    mocked.copyImage.mockRejectedValueOnce({ message: "the stored image does not decode" });
    mocked.saveImage.mockRejectedValueOnce({ message: "cannot write /read-only/frame.png" });
    render(ImageActions, { media: frame });
    await fireEvent.click(screen.getByRole("button", { name: "Copy image" }));
    await vi.waitFor(() =>
      expect(screen.getByLabelText("Image action").textContent).toBe("Not copied: the stored image does not decode"),
    );
    await fireEvent.click(screen.getByRole("button", { name: "Save image" }));
    await vi.waitFor(() =>
      expect(screen.getByLabelText("Image action").textContent).toBe("Not saved: cannot write /read-only/frame.png"),
    );
  });
});
