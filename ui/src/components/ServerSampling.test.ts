import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { SamplingQuestion } from "../lib/bindings";
import ServerSampling from "./ServerSampling.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// The host's window events are not pulled here: a test calls the handlers itself.
const events = vi.hoisted(() => ({ handlers: [] as Array<() => void> }));
vi.mock("../lib/windowEvents", () => ({
  onWindowEvent: (notice: string, handler: () => void) => {
    if (notice === "mcpQuestions") events.handlers.push(handler);
    return () => {};
  },
}));
const api = apiModule as unknown as ApiMock;
// The image viewer measures its area (bind:clientWidth); jsdom has no ResizeObserver.
vi.stubGlobal(
  "ResizeObserver",
  class {
    observe(): void {}
    unobserve(): void {}
    disconnect(): void {}
  },
);

afterEach(() => {
  resetApi(api);
  events.handlers.length = 0;
});

/** The consent button once it takes clicks (lib/consent: 500 ms after it showed). */
async function armed(element: HTMLElement): Promise<HTMLElement> {
  const button = element.closest("button") as HTMLButtonElement;
  await waitFor(() => expect(button.disabled).toBe(false));
  return button;
}

const asking: SamplingQuestion = {
  id: "sample_1",
  request: {
    server: "weather",
    messages: [{ role: "user", content: [{ type: "text", text: "Forecast for Paris?" }] }],
    systemPrompt: "Answer in one sentence.",
    tools: [{ name: "forecast", description: "The forecast", inputSchema: {} }],
    toolChoice: "auto",
    modelHints: ["claude-sonnet"],
    costPriority: null,
    speedPriority: null,
    intelligencePriority: null,
    maxTokens: 60,
    includeContext: null,
    temperature: null,
    stopSequences: [],
  },
  state: { state: "asking" },
};

const groups = [
  { provider: "local", models: ["small"] },
  { provider: "scripted", models: ["m", "n"] },
];

describe("a server's sampling request in the chat", () => {
  it("shows the whole request and runs it on the chat's model only when approved", async () => {
    api.mcpSamplingRequests.mockResolvedValue([asking]);
    api.answerSampling.mockResolvedValue(undefined);
    render(ServerSampling, { groups, choice: { provider: "scripted", model: "n" } });
    expect(await screen.findByText("Forecast for Paris?")).toBeTruthy();
    expect(screen.getByText("weather")).toBeTruthy();
    expect(screen.getByText("Answer in one sentence.")).toBeTruthy();
    expect(screen.getAllByText("forecast").length).toBeGreaterThan(0);
    expect(screen.getByText(/Tools offered to the model/).textContent).toContain("forecast (The forecast)");
    expect(screen.getByText(/models like “claude-sonnet”/)).toBeTruthy();
    // The tools' input schemas (the model reads them as instructions too) and the size
    // of what goes to the model are shown.
    expect(screen.getByLabelText("Input schema of forecast").textContent).toBe("{}");
    expect(screen.getByLabelText("Size of the request").textContent).toContain(
      "64 characters of text go to the model (about 16 tokens)",
    );
    expect(api.answerSampling).not.toHaveBeenCalled();
    await fireEvent.click(await armed(screen.getByText("Approve and run")));
    await waitFor(() =>
      expect(api.answerSampling).toHaveBeenCalledWith("sample_1", { action: "run", pick: { provider: "scripted", model: "n" } }),
    );
  });

  it("shows each image the host draws, by its place in the request, and says when one cannot be shown", async () => {
    const image = (bytes: number) => ({ type: "image" as const, mimeType: "image/png", bytes });
    api.mcpSamplingRequests.mockResolvedValue([
      {
        ...asking,
        request: {
          ...asking.request,
          messages: [
            { role: "user", content: [{ type: "text", text: "Compare these." }, image(120_000)] },
            { role: "assistant", content: [{ type: "text", text: "Which?" }] },
            { role: "user", content: [image(3), image(4_000)] },
          ],
        },
      },
    ]);
    render(ServerSampling, { groups, choice: null });
    const shown = (await screen.findAllByRole("img")) as HTMLImageElement[];
    expect(shown.map((img) => img.getAttribute("src"))).toEqual([
      "media://localhost/sampling/sample_1/0",
      "media://localhost/sampling/sample_1/1",
      "media://localhost/sampling/sample_1/2",
    ]);
    expect(shown.map((img) => img.alt)).toEqual([
      "Image 1 that goes to the model",
      "Image 2 that goes to the model",
      "Image 3 that goes to the model",
    ]);
    // Each keeps its caption with the type and size.
    expect(screen.getByText("[image, image/png, 120000 bytes]")).toBeTruthy();
    // The host answers 422 for bytes that do not decode (404 once the request is gone):
    // the image gives way to a line that says so.
    await fireEvent.error(shown[1] as HTMLImageElement);
    expect(await screen.findByText("Conduit could not show this image.")).toBeTruthy();
    expect(screen.getAllByRole("img")).toHaveLength(2);
  });

  it("opens an image at its own size, drawn whole by the host, and closes when the request goes", async () => {
    const image = (mimeType: string) => ({ type: "image" as const, mimeType, bytes: 9 });
    const withImages: SamplingQuestion = {
      ...asking,
      request: {
        ...asking.request,
        messages: [{ role: "user", content: [image("image/png"), { type: "text", text: "and" }, image("image/webp")] }],
      },
    };
    api.mcpSamplingRequests.mockResolvedValue([withImages]);
    render(ServerSampling, { groups, choice: null });
    await fireEvent.click(await screen.findByLabelText("Open image 2 at its own size"));
    const viewer = await screen.findByRole("dialog", { name: "Image viewer" });
    const whole = viewer.querySelector("img") as HTMLImageElement;
    expect(whole.getAttribute("src")).toBe("media://localhost/sampling/sample_1/1/whole");
    expect(viewer.textContent).toContain("image/webp");
    expect(viewer.textContent).toContain("2 of 2");
    // Looked at, not stored: no copy or save.
    expect(viewer.querySelector('[aria-label^="Copy"], [aria-label^="Save"]')).toBeNull();
    // Escape closes the viewer, and only the viewer: it never reaches the window, where
    // the chat would stop the running turn, and the approval stays.
    const reachedWindow = vi.fn();
    window.addEventListener("keydown", reachedWindow);
    await fireEvent.keyDown(viewer, { key: "Escape" });
    window.removeEventListener("keydown", reachedWindow);
    await waitFor(() => expect(screen.queryByRole("dialog")).toBeNull());
    expect(reachedWindow).not.toHaveBeenCalled();
    expect(api.answerSampling).not.toHaveBeenCalled();

    // Opened on another image: it starts there.
    await fireEvent.click(screen.getByLabelText("Open image 1 at its own size"));
    const again = await screen.findByRole("dialog", { name: "Image viewer" });
    expect(again.querySelector("img")?.getAttribute("src")).toBe("media://localhost/sampling/sample_1/0/whole");
    expect(again.textContent).toContain("1 of 2");
    // The server withdraws the request: its images are no longer drawn, and the viewer goes.
    api.mcpSamplingRequests.mockResolvedValue([]);
    events.handlers.forEach((handler) => handler());
    await waitFor(() => expect(screen.queryByRole("dialog")).toBeNull());
    expect(screen.queryByLabelText("Open image 1 at its own size")).toBeNull();
  });

  it("says so in the viewer when the host cannot draw the whole image", async () => {
    api.mcpSamplingRequests.mockResolvedValue([
      {
        ...asking,
        request: { ...asking.request, messages: [{ role: "user", content: [{ type: "image", mimeType: "image/png", bytes: 3 }] }] },
      },
    ]);
    render(ServerSampling, { groups, choice: null });
    await fireEvent.click(await screen.findByLabelText("Open image 1 at its own size"));
    const viewer = await screen.findByRole("dialog", { name: "Image viewer" });
    await fireEvent.error(viewer.querySelector("img") as HTMLImageElement);
    expect((await screen.findByRole("alert")).textContent).toBe("Conduit could not show this image.");
  });

  it("shows the model's answer and sends it only when asked", async () => {
    api.mcpSamplingRequests.mockResolvedValue([
      {
        ...asking,
        state: {
          state: "review",
          pick: { provider: "scripted", model: "m" },
          result: { model: "m", content: [{ type: "text", text: "Sunny." }], stopReason: "endTurn" },
        },
      },
    ]);
    api.answerSampling.mockResolvedValue(undefined);
    render(ServerSampling, { groups, choice: null });
    expect(await screen.findByText("Sunny.")).toBeTruthy();
    await fireEvent.click(await armed(screen.getByText("Send to weather")));
    await waitFor(() => expect(api.answerSampling).toHaveBeenCalledWith("sample_1", { action: "send" }));
    await waitFor(() => expect(screen.queryByText("Sunny.")).toBeNull());
  });

  it("takes no Approve for 500 ms after it shows, above any view, and tells the chat a request waits", async () => {
    api.mcpSamplingRequests.mockResolvedValue([asking]);
    api.answerSampling.mockResolvedValue(undefined);
    const onPending = vi.fn();
    render(ServerSampling, { groups, choice: null, onPending });
    const approve = (await screen.findByText("Approve and run")) as HTMLButtonElement;
    await waitFor(() => expect(onPending).toHaveBeenLastCalledWith(true));
    expect(approve.closest("section")?.classList.contains("z-40")).toBe(true);
    expect(approve.disabled).toBe(true);
    expect(approve.dataset.arming).toBe("");
    // A double-click whose first half made it appear: the second half lands on it.
    await fireEvent.click(approve);
    expect(api.answerSampling).not.toHaveBeenCalled();
    // Deny is no consent: it takes a click at once.
    await fireEvent.click(screen.getByText("Deny"));
    await waitFor(() => expect(api.answerSampling).toHaveBeenCalledWith("sample_1", { action: "deny" }));
    await waitFor(() => expect(onPending).toHaveBeenLastCalledWith(false));
  });

  it("denies, and shows what the host refused", async () => {
    api.mcpSamplingRequests.mockResolvedValue([asking]);
    api.answerSampling.mockRejectedValueOnce({ message: "the request cannot take that now: it is running" });
    render(ServerSampling, { groups, choice: null });
    await fireEvent.click(await armed(await screen.findByText("Approve and run")));
    expect((await screen.findByRole("alert")).textContent).toContain("it is running");
    expect(api.answerSampling).toHaveBeenCalledWith("sample_1", { action: "run", pick: { provider: "local", model: "small" } });
    api.answerSampling.mockResolvedValue(undefined);
    await fireEvent.click(screen.getByText("Deny"));
    await waitFor(() => expect(api.answerSampling).toHaveBeenCalledWith("sample_1", { action: "deny" }));
  });
});

describe("when the requests cannot be listed", () => {
  it("says so instead of showing nothing", async () => {
    api.mcpSamplingRequests.mockRejectedValue({ message: "the engine did not answer" });
    render(ServerSampling, { groups, choice: { provider: "scripted", model: "m" } });
    const problem = await screen.findByLabelText("Sampling requests problem");
    expect(problem.textContent).toContain("the engine did not answer");
  });
});
