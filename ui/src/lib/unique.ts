// Lists from MCP servers and models may repeat an item, and a keyed {#each} throws on a repeated
// key (each_key_duplicate, in production builds too), dropping the whole update: the first of
// each key is kept.

/** `items` without the later ones whose key an earlier one has, in order. */
export function uniqueBy<T>(items: readonly T[], keyOf: (item: T) => string): T[] {
  const seen = new Set<string>();
  return items.filter((item) => {
    const key = keyOf(item);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** `values` without repeats, in order. */
export function unique(values: readonly string[]): string[] {
  return uniqueBy(values, (value) => value);
}
