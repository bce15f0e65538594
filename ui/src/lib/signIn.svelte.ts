// One HTTP server's sign-in (OAuth) in Settings, without the view: whether a sign-in is
// stored, a sign-in under way (the authorization URL shown in full while the browser is
// out), and what signing out did.
import type * as Api from "./api";
import { errorMessage } from "./api";
import type { SignedOut } from "./types";

/** The commands sign-in uses, typed by api.ts (tests give typed mocks). */
export type SignInApi = Pick<typeof Api, "mcpSignIn" | "mcpSignOut" | "mcpSignedIn">;

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
        this.url = url;
      });
      this.phase = "signed_in";
      this.message = `Signed in to ${this.server}.`;
    } catch (e) {
      this.error = errorMessage(e);
      this.phase = "signed_out";
      void this.refresh();
    } finally {
      this.url = null;
    }
  }

  async signOut(): Promise<void> {
    this.error = null;
    try {
      const outcome = await this.api.mcpSignOut(this.server);
      this.phase = "signed_out";
      this.message = signedOutText(this.server, outcome);
    } catch (e) {
      this.error = errorMessage(e);
    }
  }
}
