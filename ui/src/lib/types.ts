// The data the backend sends, generated from the Rust types into bindings.ts (one source of
// truth: a Rust rename fails svelte-check), plus the few types that are the UI's own.
export type * from "./bindings";
import type { ReasoningEffort } from "./bindings";

/** The models a user can pick, grouped by provider. */
export interface ModelGroup {
  provider: string;
  models: string[];
}

export interface ModelChoice {
  provider: string;
  model: string;
  /** How much the model is asked to think; null or absent: its default. */
  thinking?: ReasoningEffort | null;
}
