// Exporting the conversation on screen from the window: the host asks where (a native
// save dialog) and writes it with its media beside it; this says what happened.
import type * as Api from "./api";
import { errorMessage } from "./api";
import type { Format } from "./types";

export type ExportApi = Pick<typeof Api, "exportConversation">;

export class Exporter {
  /** What the last export did, in words (null: nothing yet, or cancelled). */
  status = $state<string | null>(null);
  error = $state<string | null>(null);
  busy = $state(false);

  constructor(private readonly api: ExportApi) {}

  async run(conversation: string, format: Format): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    this.status = null;
    this.error = null;
    try {
      const file = await this.api.exportConversation(conversation, format);
      this.status = file === null ? null : `Exported to ${file}`;
    } catch (e) {
      this.error = `The export failed: ${errorMessage(e)}`;
    } finally {
      this.busy = false;
    }
  }

  /** Forgets what the last export said (another conversation is on screen). */
  clear(): void {
    this.status = null;
    this.error = null;
  }
}
