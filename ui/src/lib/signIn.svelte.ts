// One HTTP server's sign-in (OAuth) in Settings, without the view: whether a sign-in is
// stored, a sign-in under way (the authorization URL shown in full while the browser is
// out), and what signing out did.
import type * as Api from "./api";
import { commandError, errorMessage } from "./api";
import type { SignedOut } from "./types";

/** The commands sign-in uses, typed by api.ts (tests give typed mocks). */
export type SignInApi = Pick<typeof Api, "mcpSignIn" | "mcpSignOut" | "mcpSignedIn" | "mcpFile" | "editMcpFile">;

export type SignInPhase = "unknown" | "signed_out" | "waiting" | "signed_in";

/** What a sign-out did, in words. */
export function signedOutText(server: string, outcome: SignedOut): string {
  switch (outcome.kind) {
    case "nothing_stored":
      return `${server} had no sign-in stored.`;
    case "revoked":
      return `Signed out of ${server}; its tokens were revoked.`;
    case "forgotten":
      return `Signed out of ${server}. Its authorization server offers no revocation, so the tokens were forgotten here.`;
    case "revocation_failed":
      return `Signed out of ${server}, but revoking its tokens failed (${outcome.reason}); they were forgotten here.`;
  }
}

export class SignInController {
  phase = $state<SignInPhase>("unknown");
  /** The page the browser was sent to, while it is out. */
  url = $state<string | null>(null);
  message = $state<string | null>(null);
  error = $state<string | null>(null);
  /** The server's authorization server lets Conduit neither register nor use a metadata
   * document: the user gives the client id its provider issued. */
  needsClientId = $state(false);

  constructor(
    private readonly api: SignInApi,
    readonly server: string,
  ) {}

  /** Reads whether a sign-in is stored. */
  async refresh(): Promise<void> {
    try {
      const stored = await this.api.mcpSignedIn(this.server);
      if (this.phase !== "waiting") this.phase = stored ? "signed_in" : "signed_out";
    } catch (e) {
      this.error = errorMessage(e);
    }
  }

  /** Signs in; the host opens the browser and sends the URL it opened, to show. */
  async signIn(): Promise<void> {
    if (this.phase === "waiting") return;
    this.phase = "waiting";
    this.url = null;
    this.message = null;
    this.error = null;
    try {
      await this.api.mcpSignIn(this.server, (url) => {
        // Its stream and the command's answer travel apart: a URL that arrives after the
        // sign-in ended is not shown.
        if (this.phase === "waiting") this.url = url;
      });
      this.phase = "signed_in";
      this.message = `Signed in to ${this.server}.`;
    } catch (e) {
      this.error = errorMessage(e);
      this.needsClientId = commandError(e).action === "enter_client_id";
      this.phase = "signed_out";
      void this.refresh();
    } finally {
      this.url = null;
    }
  }

  /** Writes `clientId` into the entry's `oauth` (the file keeps it) and signs in with it. */
  async saveClientId(clientId: string): Promise<void> {
    const id = clientId.trim();
    if (id === "") {
      this.error = "Type the client id the server's provider gave you.";
      return;
    }
    try {
      const file = await this.api.mcpFile();
      const server = file.servers.find((s) => s.name === this.server);
      if (!server) throw new Error(`${this.server} is no longer in the file`);
      const oauth = typeof server.entry.oauth === "object" && server.entry.oauth !== null ? server.entry.oauth : {};
      await this.api.editMcpFile(file.version, {
        kind: "update",
        name: this.server,
        entry: { ...server.entry, oauth: { ...oauth, clientId: id } },
      });
    } catch (e) {
      this.error = errorMessage(e);
      return;
    }
    this.needsClientId = false;
    await this.signIn();
  }

  async signOut(): Promise<void> {
    this.error = null;
    try {
      const outcome = await this.api.mcpSignOut(this.server);
      if (outcome === null) {
        this.message = `Still signed in to ${this.server}: the sign-out was not confirmed.`;
        return;
      }
      this.phase = "signed_out";
      this.message = signedOutText(this.server, outcome);
    } catch (e) {
      this.error = errorMessage(e);
    }
  }
}
