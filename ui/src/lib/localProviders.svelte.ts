// The first run's offer: model servers found on this computer (Ollama, LM Studio), added
// as providers with one click.
import type * as Api from "./api";
import { errorMessage } from "./api";
import type { LocalProvider } from "./types";

export type LocalProvidersApi = Pick<typeof Api, "detectLocalProviders" | "addLocalProvider">;

export class LocalProviders {
  /** What was found; null while still looking (or before `look`). */
  found = $state<LocalProvider[] | null>(null);
  #looked = false;
  readonly #api: LocalProvidersApi;

  constructor(api: LocalProvidersApi) {
    this.#api = api;
  }

  /** Looks once; a failed look finds nothing (the panel still explains Settings). */
  look(): void {
    if (this.#looked) return;
    this.#looked = true;
    this.#api.detectLocalProviders().then(
      (found) => (this.found = found),
      () => (this.found = []),
    );
  }

  /** Saves `provider`; the error's message if that failed, else null. */
  async use(provider: LocalProvider): Promise<string | null> {
    try {
      await this.#api.addLocalProvider(provider);
      return null;
    } catch (e) {
      return errorMessage(e);
    }
  }
}
