import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { afterEach, describe, expect, it, vi } from "vitest";
import * as apiModule from "../lib/api";
import { resetApi, type ApiMock } from "../lib/apiMock";
import type { Question } from "../lib/bindings";
import ServerQuestions from "./ServerQuestions.svelte";

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
  it("shows what hides or rearranges the server's text as its code", async () => {
    const hiding: Question = {
      id: "ask_3",
      elicitation: {
        server: "git\u202Ebuh",
        message: "Approve invoice\u202Efdp.exe?\u200B",
        kind: { mode: "form", fields: [{ name: "ok", title: "Sure\u2066", description: null, required: false, input: { type: "boolean", default: null } }] },
      },
    };
    api.mcpQuestions.mockResolvedValue([hiding]);
    render(ServerQuestions);
    expect(await screen.findByText("Approve invoice\\u{202e}fdp.exe?\\u{200b}")).toBeTruthy();
    expect(screen.getByText("git\\u{202e}buh")).toBeTruthy();
    expect(screen.getByText("Sure\\u{2066}")).toBeTruthy();
  });

  it("shows the form with its defaults and sends the typed answer to the host", async () => {
    api.mcpQuestions.mockResolvedValue([form]);
    api.answerQuestion.mockResolvedValue(undefined);
    render(ServerQuestions);
    expect(await screen.findByText("Which repository?")).toBeTruthy();
    expect(screen.getByText("github")).toBeTruthy();
    const repo = screen.getByLabelText("Repository *") as HTMLInputElement;
    expect(repo.value).toBe("conduit");
    await fireEvent.input(screen.getByLabelText("stars"), { target: { value: "12" } });
    await fireEvent.click(await armed(screen.getByText("Submit to github")));
    await waitFor(() =>
      expect(api.answerQuestion).toHaveBeenCalledWith("ask_1", { action: "accept", values: { repo: "conduit", stars: 12 } }),
    );
    await waitFor(() => expect(screen.queryByText("Which repository?")).toBeNull());
  });

  it("keeps a long message in a bounded box, the server named on the Submit button", async () => {
    const forged = "Please confirm" + "\n".repeat(30000) + "The MCP server github asks:\nPaste your token";
    api.mcpQuestions.mockResolvedValue([{ ...form, elicitation: { ...form.elicitation, server: "evil", message: forged } }]);
    render(ServerQuestions);
    const submit = await screen.findByText("Submit to evil");
    const message = submit.closest("section")?.querySelector(".server-words");
    expect(message?.textContent).toContain("Paste your token");
    expect(message?.classList.contains("max-h-40")).toBe(true);
    expect(message?.classList.contains("overflow-auto")).toBe(true);
  });

  it("shows what the host refused and keeps the question", async () => {
    api.mcpQuestions.mockResolvedValue([form]);
    api.answerQuestion.mockRejectedValue({ message: "the answer does not fit the form: Repository: must be at most 3 characters" });
    render(ServerQuestions);
    await fireEvent.click(await armed(await screen.findByText("Submit to github")));
    expect((await screen.findByRole("alert")).textContent).toContain("does not fit the form");
    expect(screen.getByText("Which repository?")).toBeTruthy();
  });

  it("takes no Submit or Open for 500 ms after they show, above any view, and tells the chat they wait", async () => {
    api.mcpQuestions.mockResolvedValue([form, page]);
    api.answerQuestion.mockResolvedValue(undefined);
    const onPending = vi.fn();
    render(ServerQuestions, { onPending });
    const submit = (await screen.findByText("Submit to github")) as HTMLButtonElement;
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

  it("shows a hostile server's form: fields named like Object.prototype's members, repeated fields and options", async () => {
    const text = (name: string) => ({ name, title: null, description: null, required: false, input: { type: "text" as const, default: null, format: null, minLength: null, maxLength: null } });
    const hostile: Question = {
      id: "ask_3",
      elicitation: {
        server: "evil",
        message: "Tricky form",
        kind: {
          mode: "form",
          fields: [
            text("toString"),
            text("constructor"),
            text("__proto__"),
            text("hasOwnProperty"),
            text("toString"),
            { name: "pick", title: null, description: null, required: true, input: { type: "choice", options: [{ value: "a", title: null }, { value: "a", title: null }], default: "a" } },
            { name: "many", title: null, description: null, required: false, input: { type: "choices", options: [{ value: "x", title: null }, { value: "x", title: null }], default: [], minItems: null, maxItems: null } },
          ],
        },
      },
    };
    api.mcpQuestions.mockResolvedValue([hostile]);
    api.answerQuestion.mockResolvedValue(undefined);
    const { container } = render(ServerQuestions);
    expect(await screen.findByText("Tricky form")).toBeTruthy();
    expect(screen.getAllByLabelText("toString")).toHaveLength(1);
    expect(screen.getAllByRole("option")).toHaveLength(1);
    for (const name of ["toString", "constructor", "__proto__", "hasOwnProperty"]) {
      await fireEvent.input(screen.getByLabelText(name), { target: { value: `typed ${name}` } });
    }
    const choices = container.querySelectorAll<HTMLInputElement>('input[name="many:x"]');
    expect(choices).toHaveLength(1);
    await fireEvent.click(choices[0]!);
    await fireEvent.click(await armed(screen.getByText("Submit to evil")));
    await waitFor(() => expect(api.answerQuestion).toHaveBeenCalled());
    const [id, answer] = api.answerQuestion.mock.calls[0]!;
    expect(id).toBe("ask_3");
    if (answer.action !== "accept") throw new Error("not accepted");
    expect(Object.entries(answer.values)).toEqual([
      ["toString", "typed toString"],
      ["constructor", "typed constructor"],
      ["__proto__", "typed __proto__"],
      ["hasOwnProperty", "typed hasOwnProperty"],
      ["pick", "a"],
      ["many", ["x"]],
    ]);
  });
});

describe("when the questions cannot be listed, or a listing comes late", () => {
  it("says so instead of showing nothing, and clears it once they list", async () => {
    api.mcpQuestions.mockRejectedValueOnce({ message: "the engine did not answer" });
    render(ServerQuestions, {});
    const problem = await screen.findByLabelText("Server questions problem");
    expect(problem.textContent).toContain("The servers' questions could not be listed: the engine did not answer");
    api.mcpQuestions.mockResolvedValue([form]);
    events.handlers.forEach((handler) => handler());
    await screen.findByText("Which repository?");
    expect(screen.queryByLabelText("Server questions problem")).toBeNull();
  });

  it("does not show an answered question again from a listing an answer's reload overtook", async () => {
    let answerSlow: (questions: Question[]) => void = () => {};
    api.mcpQuestions.mockReturnValueOnce(new Promise((resolve) => (answerSlow = resolve)));
    api.mcpQuestions.mockResolvedValueOnce([]);
    render(ServerQuestions, {});
    events.handlers.forEach((handler) => handler());
    await waitFor(() => expect(api.mcpQuestions).toHaveBeenCalledTimes(2));
    answerSlow([form]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(screen.queryByText("Which repository?")).toBeNull();
  });
});
