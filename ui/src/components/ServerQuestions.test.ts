import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { Question } from "../lib/bindings";
import ServerQuestions from "./ServerQuestions.svelte";

vi.mock("../lib/api", async (importOriginal) =>
  (await import("../lib/apiMock")).mockedApi(importOriginal),
);
// The host's window events are not pulled here: no host answers.
vi.mock("../lib/windowEvents", () => ({ onWindowEvent: () => () => {} }));
const api = apiModule as unknown as ApiMock;

afterEach(() => resetApi(api));

/** The consent button once it takes clicks (lib/consent: 500 ms after it showed). */
async function armed(element: HTMLElement): Promise<HTMLElement> {
  const button = element.closest("button") as HTMLButtonElement;
  await waitFor(() => expect(button.disabled).toBe(false));
  return button;
}

const form: Question = {
  id: "ask_1",
  elicitation: {
    server: "github",
    message: "Which repository?",
    kind: {
      mode: "form",
      fields: [
        { name: "repo", title: "Repository", description: null, required: true, input: { type: "text", default: "conduit", format: null, minLength: null, maxLength: null } },
        { name: "stars", title: null, description: null, required: false, input: { type: "number", integer: true, default: null, minimum: null, maximum: null } },
      ],
    },
  },
};

const page: Question = {
  id: "ask_2",
  elicitation: { server: "pay", message: "Confirm the payment", kind: { mode: "url", url: "https://pay.example/c?id=7" } },
};

describe("a server's questions in the chat", () => {
  it("shows the form with its defaults and sends the typed answer to the host", async () => {
    api.mcpQuestions.mockResolvedValue([form]);
    api.answerQuestion.mockResolvedValue(undefined);
    render(ServerQuestions);
    expect(await screen.findByText("Which repository?")).toBeTruthy();
    expect(screen.getByText("github")).toBeTruthy();
    const repo = screen.getByLabelText("Repository *") as HTMLInputElement;
    expect(repo.value).toBe("conduit");
    await fireEvent.input(screen.getByLabelText("stars"), { target: { value: "12" } });
    await fireEvent.click(await armed(screen.getByText("Submit")));
    await waitFor(() =>
      expect(api.answerQuestion).toHaveBeenCalledWith("ask_1", { action: "accept", values: { repo: "conduit", stars: 12 } }),
    );
    await waitFor(() => expect(screen.queryByText("Which repository?")).toBeNull());
  });

  it("shows what the host refused and keeps the question", async () => {
    api.mcpQuestions.mockResolvedValue([form]);
    api.answerQuestion.mockRejectedValue({ message: "the answer does not fit the form: Repository: must be at most 3 characters" });
    render(ServerQuestions);
    await fireEvent.click(await armed(await screen.findByText("Submit")));
    expect((await screen.findByRole("alert")).textContent).toContain("does not fit the form");
    expect(screen.getByText("Which repository?")).toBeTruthy();
  });

  it("takes no Submit or Open for 500 ms after they show, above any view, and tells the chat they wait", async () => {
    api.mcpQuestions.mockResolvedValue([form, page]);
    api.answerQuestion.mockResolvedValue(undefined);
    const onPending = vi.fn();
    render(ServerQuestions, { onPending });
    const submit = (await screen.findByText("Submit")) as HTMLButtonElement;
    const open = screen.getByText("Open in browser") as HTMLButtonElement;
    await waitFor(() => expect(onPending).toHaveBeenLastCalledWith(true));
    // Above a view in full screen (z-30), should one be there.
    expect(submit.closest("section")?.classList.contains("z-40")).toBe(true);
    expect(submit.disabled).toBe(true);
    expect(open.disabled).toBe(true);
    await fireEvent.click(submit);
    await fireEvent.click(open);
    expect(api.answerQuestion).not.toHaveBeenCalled();
    await fireEvent.click(await armed(open));
    await waitFor(() => expect(api.answerQuestion).toHaveBeenCalledWith("ask_2", { action: "accept", values: {} }));
  });

  it("shows a page's whole URL and declines when asked to", async () => {
    api.mcpQuestions.mockResolvedValue([page]);
    api.answerQuestion.mockResolvedValue(undefined);
    render(ServerQuestions);
    expect(await screen.findByText("https://pay.example/c?id=7")).toBeTruthy();
    await fireEvent.click(screen.getByText("Decline"));
    await waitFor(() => expect(api.answerQuestion).toHaveBeenCalledWith("ask_2", { action: "decline" }));
  });
});
