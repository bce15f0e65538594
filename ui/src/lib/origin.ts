/** Whether a provider's base URL still names the same server (scheme, host and port). */

/**
 * Whether two base URLs name the same origin. A URL that does not parse matches nothing,
 * as in the host, which decides: a provider moved to another origin loses its stored key
 * and masked headers unless the same save brings new ones.
 */
export function sameOrigin(a: string, b: string): boolean {
  try {
    return new URL(a.trim()).origin === new URL(b.trim()).origin;
  } catch {
    return false;
  }
}
