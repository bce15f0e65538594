// Search snippets from the store mark each match between U+E000 and U+E001 (private-use
// characters taken out of text as it is indexed, so a bracket the text has is never a
// match); this splits them for <mark>.

export interface SnippetPart {
  text: string;
  match: boolean;
}

export function snippetParts(snippet: string): SnippetPart[] {
  const parts: SnippetPart[] = [];
  const pattern = /\uE000([^\uE001]*)\uE001/g;
  let last = 0;
  for (const found of snippet.matchAll(pattern)) {
    const at = found.index ?? 0;
    if (at > last) parts.push({ text: snippet.slice(last, at), match: false });
    parts.push({ text: found[1] ?? "", match: true });
    last = at + found[0].length;
  }
  if (last < snippet.length) parts.push({ text: snippet.slice(last), match: false });
  return parts;
}
