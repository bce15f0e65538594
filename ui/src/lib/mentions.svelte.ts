// Resources and prompts in the composer, without the view: `@` mentions a server's
// resource (or a template, filled in with the server's completions), `/` at the start uses
// a server's prompt (its arguments in a small form). What is chosen is sent by name; the
// host reads the resource and gets the prompt.
import { SvelteMap } from "svelte/reactivity";
import type * as Api from "./api";
import { errorMessage } from "./api";
import type { Mentionables, PromptChoice, PromptMention, ResourceChoice, ResourceMention, TemplateChoice } from "./types";
import { unique, uniqueBy } from "./unique";

export type MentionApi = Pick<typeof Api, "mentionables" | "completeMention">;

/** What the user is typing that asks for a mention: `@query` (a resource) or a leading
 *  `/query` (a prompt), with where it starts in the text. */
export interface Trigger {
  kind: "resource" | "prompt";
  query: string;
  start: number;
}

/** The trigger ending at `caret`, if any: `@` after a space or at the start; `/` only as
 *  the message's first character. */
export function triggerAt(text: string, caret: number): Trigger | null {
  const before = text.slice(0, caret);
  const at = /(^|\s)@(\S*)$/.exec(before);
  if (at) return { kind: "resource", query: at[2] ?? "", start: before.length - (at[2] ?? "").length - 1 };
  const slash = /^\/(\S*)$/.exec(before);
  if (slash) return { kind: "prompt", query: slash[1] ?? "", start: 0 };
  return null;
}

export type Offer =
  | { kind: "resource"; item: ResourceChoice }
  | { kind: "template"; item: TemplateChoice }
  | { kind: "prompt"; item: PromptChoice };

/** A label for what is offered: server, then title or name. */
export function offerLabel(offer: Offer): string {
  const item = offer.item;
  return `${item.server}: ${item.title ?? item.name}`;
}

/** What tells offers apart, and keys them in the picker: kind, server, name and address. */
export function offerKey(offer: Offer): string {
  const address = offer.kind === "resource" ? offer.item.uri : offer.kind === "template" ? offer.item.uriTemplate : "";
  // JSON keeps the parts apart: "a" + "bc" and "ab" + "c" are different offers.
  return JSON.stringify([offer.kind, offer.item.server, offer.item.name, address]);
}

function matches(query: string, ...fields: (string | null | undefined)[]): boolean {
  const q = query.toLowerCase();
  return fields.some((f) => f?.toLowerCase().includes(q));
}

/**
 * A template or prompt whose arguments are being filled in. Argument names and suggestions
 * are the server's: each once, and kept in Maps, never as keys of a plain object (where
 * `toString` would find what every object inherits).
 */
export interface Filling {
  offer: Offer;
  arguments: string[];
  required: string[];
  values: SvelteMap<string, string>;
  suggestions: SvelteMap<string, string[]>;
}

export interface Chosen {
  label: string;
  mention: ResourceMention;
}

export class MentionController {
  offered = $state<Mentionables | null>(null);
  trigger = $state<Trigger | null>(null);
  filling = $state<Filling | null>(null);
  attached = $state<Chosen[]>([]);
  prompt = $state<{ label: string; mention: PromptMention } | null>(null);
  error = $state<string | null>(null);
  #loading: Promise<void> | null = null;

  constructor(private readonly api: MentionApi) {}

  /** Follows the composer's text and caret; reads what can be mentioned on first need. */
  typed(text: string, caret: number): void {
    this.trigger = triggerAt(text, caret);
    if (this.trigger && !this.offered && !this.#loading) {
      this.#loading = this.reload();
    }
  }

  /** The servers changed: what they offer is read again, at once while the user is
   *  choosing, else on the next `@` or `/`. */
  forget(): void {
    if (this.trigger) {
      this.#loading = this.reload();
    } else {
      this.offered = null;
    }
  }

  /** Lists offered cut short (a server listing more than Conduit takes, or too slowly),
   *  each saying how far it goes. */
  get notes(): string[] {
    return this.offered?.notes ?? [];
  }

  async reload(): Promise<void> {
    try {
      this.offered = await this.api.mentionables();
      this.error = this.offered.problems.length > 0 ? this.offered.problems.join("; ") : null;
    } catch (e) {
      this.error = errorMessage(e);
    } finally {
      this.#loading = null;
    }
  }

  /** What the current trigger offers, best first, each once (servers may list one twice). */
  get offers(): Offer[] {
    const trigger = this.trigger;
    const offered = this.offered;
    if (!trigger || !offered) return [];
    const q = trigger.query;
    if (trigger.kind === "prompt") {
      return uniqueBy(
        offered.prompts
          .filter((p) => matches(q, p.name, p.title, p.server))
          .map((item) => ({ kind: "prompt" as const, item })),
        offerKey,
      );
    }
    return uniqueBy(
      [
        ...offered.resources
          .filter((r) => matches(q, r.name, r.title, r.uri, r.server))
          .map((item) => ({ kind: "resource" as const, item })),
        ...offered.templates
          .filter((t) => matches(q, t.name, t.title, t.uriTemplate, t.server))
          .map((item) => ({ kind: "template" as const, item })),
      ],
      offerKey,
    );
  }

  /** Takes an offer: `text` without the trigger. A template or prompt with arguments
   *  opens its form first. */
  choose(offer: Offer, text: string): string {
    const trigger = this.trigger;
    const rest = trigger ? text.slice(0, trigger.start) + text.slice(trigger.start + 1 + trigger.query.length) : text;
    this.trigger = null;
    const args = unique(
      offer.kind === "template"
        ? offer.item.arguments
        : offer.kind === "prompt"
          ? offer.item.arguments.map((a) => a.name)
          : [],
    );
    const required = unique(
      offer.kind === "template" ? offer.item.arguments : offer.kind === "prompt" ? offer.item.arguments.filter((a) => a.required).map((a) => a.name) : [],
    );
    if (args.length > 0) {
      this.filling = {
        offer,
        arguments: args,
        required,
        values: new SvelteMap(args.map((a) => [a, ""])),
        suggestions: new SvelteMap(),
      };
    } else {
      this.#take(offer, {});
    }
    return rest;
  }

  /** Asks the server for suggestions for one argument as it is typed. */
  async complete(argument: string, value: string): Promise<void> {
    const filling = this.filling;
    if (!filling) return;
    filling.values.set(argument, value);
    const offer = filling.offer;
    if (offer.kind === "resource") return;
    const target =
      offer.kind === "template"
        ? { kind: "template" as const, uriTemplate: offer.item.uriTemplate }
        : { kind: "prompt" as const, name: offer.item.name };
    try {
      const values = await this.api.completeMention(offer.item.server, target, argument, value);
      // Only for what the argument still holds: suggestions for "a" that come after those
      // for "ab" are not shown over them.
      if (this.filling === filling && filling.values.get(argument) === value) {
        filling.suggestions.set(argument, unique(values));
      }
    } catch {
      // No suggestions: the server offers no completion for it.
    }
  }

  /** Takes the form: refused (saying which) while a required argument is empty. */
  confirm(): boolean {
    const filling = this.filling;
    if (!filling) return false;
    const missing = filling.required.filter((name) => (filling.values.get(name) ?? "").trim() === "");
    if (missing.length > 0) {
      this.error = `Fill in ${missing.join(", ")}.`;
      return false;
    }
    this.error = null;
    // Own properties (Object.fromEntries defines them), so an argument named `__proto__`
    // reaches the host as a key of the mention's arguments.
    this.#take(filling.offer, Object.fromEntries(filling.values));
    this.filling = null;
    return true;
  }

  cancelFilling(): void {
    this.filling = null;
  }

  #take(offer: Offer, values: Record<string, string>): void {
    const label = offerLabel(offer);
    if (offer.kind === "prompt") {
      this.prompt = { label, mention: { server: offer.item.server, name: offer.item.name, arguments: values } };
      return;
    }
    const mention: ResourceMention =
      offer.kind === "resource"
        ? { kind: "resource", server: offer.item.server, uri: offer.item.uri }
        : { kind: "template", server: offer.item.server, uriTemplate: offer.item.uriTemplate, arguments: values };
    const shown =
      offer.kind === "template" ? `${label} (${Object.values(values).join(", ")})` : label;
    this.attached = [...this.attached, { label: shown, mention }];
  }

  remove(index: number): void {
    this.attached = this.attached.filter((_, i) => i !== index);
  }

  removePrompt(): void {
    this.prompt = null;
  }

  /** Whether anything is chosen (a message may then be sent without text). */
  get any(): boolean {
    return this.attached.length > 0 || this.prompt !== null;
  }

  /** What the next message takes along; forgets it (see `restore`). */
  take(): Taken {
    const taken: Taken = {
      resources: this.attached.map((a) => a.mention),
      prompt: this.prompt?.mention ?? null,
      labels: [...(this.prompt ? [`/${this.prompt.label}`] : []), ...this.attached.map((a) => `@${a.label}`)],
      chosen: this.attached,
      promptChosen: this.prompt,
    };
    this.attached = [];
    this.prompt = null;
    return taken;
  }

  /** Puts back what a message took along, when it could not be sent, before what was
   *  chosen since (which is kept, as the composer keeps what was typed since). */
  restore(taken: Taken): void {
    const key = (chosen: Chosen): string => JSON.stringify(chosen.mention);
    const back = new Set(taken.chosen.map(key));
    this.attached = [...taken.chosen, ...this.attached.filter((chosen) => !back.has(key(chosen)))];
    this.prompt = this.prompt ?? taken.promptChosen;
  }
}

/** What one message took along. */
export interface Taken {
  resources: ResourceMention[];
  prompt: PromptMention | null;
  /** How it is shown in the message until the stored one replaces it. */
  labels: string[];
  chosen: Chosen[];
  promptChosen: { label: string; mention: PromptMention } | null;
}
