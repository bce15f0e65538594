// What a ready MCP server is, in a few words for Settings: the protocol era it speaks and
// what it offers.
import type { ServerDetails } from "./bindings";

/** E.g. "2026-07-28 (stateless) · tools, resources". */
export function speaks(details: ServerDetails): string {
  const era = details.protocolVersion >= "2026-07-28" ? "stateless" : "with a session";
  const offers = [
    details.tools ? "tools" : null,
    details.resources ? "resources" : null,
    details.prompts ? "prompts" : null,
  ].filter((offer): offer is string => offer !== null);
  const offered = offers.length > 0 ? offers.join(", ") : "nothing listed";
  return `${details.protocolVersion} (${era}) · ${offered}`;
}
