// Sign-in's states without a DOM: a typed fake Api answered by hand.
import { describe, expect, it, vi, type Mock } from "vitest";
import { commandError } from "./api";
import { SignInController, signedOutText, type SignInApi } from "./signIn.svelte";

type FakeApi = { [Name in keyof SignInApi]: Mock<SignInApi[Name]> };

function setup() {
  const api: FakeApi = {
    mcpSignIn: vi.fn(),
    mcpSignOut: vi.fn(),
    mcpSignedIn: vi.fn(),
    mcpFile: vi.fn(),
    editMcpFile: vi.fn(),
  };
  return { api, sign: new SignInController(api, "tracker") };
}

function deferred<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((done, fail) => ((resolve = done), (reject = fail)));
  return { promise, resolve, reject };
}

describe("SignInController", () => {
  it("shows the authorization URL in full while the browser is out, then signed in", async () => {
    const { api, sign } = setup();
    const done = deferred<void>();
    let sendUrl: (url: string) => void = () => {};
    api.mcpSignIn.mockImplementation((_server, onUrl) => {
      sendUrl = onUrl;
      return done.promise;
    });
    const signing = sign.signIn();
    expect(sign.phase).toBe("waiting");
    const url = "https://auth.example.com/authorize?client_id=abc&code_challenge=xyz&state=s&resource=https%3A%2F%2Fmcp";
    sendUrl(url);
    expect(sign.url).toBe(url);
    // A second press while waiting starts nothing.
    await sign.signIn();
    expect(api.mcpSignIn).toHaveBeenCalledTimes(1);
    done.resolve();
    await signing;
    expect(sign.phase).toBe("signed_in");
    expect(sign.url).toBeNull();
    expect(sign.message).toBe("Signed in to tracker.");
    expect(api.mcpSignIn.mock.calls[0]?.[0]).toBe("tracker");
  });

  it("a failed sign-in says why and reads the stored state again", async () => {
    const { api, sign } = setup();
    api.mcpSignIn.mockRejectedValue(commandError({ message: "the sign-in was not finished within 300s" }));
    api.mcpSignedIn.mockResolvedValue(false);
    await sign.signIn();
    expect(sign.error).toContain("not finished");
    expect(sign.phase).toBe("signed_out");
    expect(api.mcpSignedIn).toHaveBeenCalledWith("tracker");
  });

  it("refresh reads whether a sign-in is stored", async () => {
    const { api, sign } = setup();
    api.mcpSignedIn.mockResolvedValue(true);
    await sign.refresh();
    expect(sign.phase).toBe("signed_in");
  });

  it("sign-out says what happened to the tokens", async () => {
    const { api, sign } = setup();
    api.mcpSignOut.mockResolvedValue({ kind: "revoked" });
    await sign.signOut();
    expect(sign.phase).toBe("signed_out");
    expect(sign.message).toBe("Signed out of tracker; its tokens were revoked.");
    expect(signedOutText("x", { kind: "revocation_failed", reason: "503" })).toContain("(503)");
    expect(signedOutText("x", { kind: "forgotten" })).toContain("no revocation");
    expect(signedOutText("x", { kind: "nothing_stored" })).toBe("x had no sign-in stored.");
  });

  it("a sign-out the user did not confirm keeps the sign-in and says so", async () => {
    const { api, sign } = setup();
    api.mcpSignedIn.mockResolvedValue(true);
    await sign.refresh();
    api.mcpSignOut.mockResolvedValue(null);
    await sign.signOut();
    expect(sign.phase).toBe("signed_in");
    expect(sign.message).toBe("Still signed in to tracker: the sign-out was not confirmed.");
    expect(sign.error).toBeNull();
  });

  it("asks for a client id when the server lets nobody register, keeps it in the entry and signs in", async () => {
    const { api, sign } = setup();
    api.mcpSignIn.mockRejectedValueOnce(
      commandError({ message: "put a client id it gave you in the entry", action: "enter_client_id" }),
    );
    api.mcpSignedIn.mockResolvedValue(false);
    await sign.signIn();
    expect(sign.needsClientId).toBe(true);

    await sign.saveClientId("   ");
    expect(sign.error).toContain("Type the client id");
    expect(api.editMcpFile).not.toHaveBeenCalled();

    api.mcpFile.mockResolvedValue({
      path: "/x/mcp.json",
      text: "",
      version: "v1",
      problem: null,
      servers: [
        {
          name: "tracker",
          disabled: false,
          transport: "http",
          problem: null,
          entry: { type: "http", url: "https://mcp.example.com/mcp", oauth: { scopes: ["read"] } },
        },
      ],
    });
    api.editMcpFile.mockResolvedValue({ path: "/x/mcp.json", text: "", version: "v2", problem: null, servers: [] });
    api.mcpSignIn.mockResolvedValueOnce(undefined);
    await sign.saveClientId(" abc-123 ");
    expect(api.editMcpFile).toHaveBeenCalledWith("v1", {
      kind: "update",
      name: "tracker",
      entry: { type: "http", url: "https://mcp.example.com/mcp", oauth: { scopes: ["read"], clientId: "abc-123" } },
    });
    expect(sign.needsClientId).toBe(false);
    expect(sign.phase).toBe("signed_in");
  });
});
