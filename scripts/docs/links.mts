// Relative links of Markdown files: the file each names must exist in the project, and an
// anchor into a Markdown file must be one of its headings (GitHub's slugs) or explicit anchors.

export interface Link {
  line: number;
  target: string;
}

/** The lines of a Markdown file with fenced code blocks left empty (so line numbers hold). */
export function unfenced(markdown: string): string[] {
  let fence: string | null = null;
  return markdown.split('\n').map((line) => {
    const opening = /^\s{0,3}(`{3,}|~{3,})/.exec(line);
    if (fence) {
      if (opening && opening[1][0] === fence[0] && opening[1].length >= fence.length && line.trim() === opening[1]) fence = null;
      return '';
    }
    if (opening) {
      fence = opening[1];
      return '';
    }
    return line;
  });
}

/** The lines outside fenced code blocks, inline code spans removed: what a link can be in. */
export function proseOf(markdown: string): string[] {
  return unfenced(markdown).map((line) => line.replace(/(`+)(?:(?!\1).)+?\1/g, ''));
}

/** Inline links and images `[text](target "title")` and reference definitions `[label]: target`. */
export function linksOf(markdown: string): Link[] {
  const links: Link[] = [];
  proseOf(markdown).forEach((text, i) => {
    for (const m of text.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+"[^"]*")?\s*\)/g))
      links.push({ line: i + 1, target: m[1].replace(/^<|>$/g, '') });
    const definition = /^\s{0,3}\[[^\]]+\]:\s*(\S+)/.exec(text);
    if (definition) links.push({ line: i + 1, target: definition[1].replace(/^<|>$/g, '') });
  });
  return links;
}

/** GitHub's anchor for a heading's text (github-slugger): lowercase, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .replace(/<[^>]+>/g, '')
    .trim()
    .toLowerCase();
  return text.replace(/[^\p{L}\p{N}\p{M}\p{Pc}\- ]/gu, '').replace(/ /g, '-');
}

/** Every anchor a Markdown file offers: its headings' slugs (repeats numbered as GitHub does) and `<a id|name>`. */
export function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const text of unfenced(markdown)) {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text);
    if (heading) {
      const base = slug(heading[1]);
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      anchors.add(n === 0 ? base : `${base}-${n}`);
    }
    for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(m[1]);
  }
  return anchors;
}

/** Headings of a Markdown file whose anchor an earlier heading already has (GitHub would number it: a link cannot tell them apart). */
export function repeatedHeadings(markdown: string): { line: number; heading: string }[] {
  const seen = new Set<string>();
  const repeated: { line: number; heading: string }[] = [];
  unfenced(markdown).forEach((text, i) => {
    const heading = /^\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text);
    if (!heading) return;
    const anchor = slug(heading[1]);
    if (seen.has(anchor)) repeated.push({ line: i + 1, heading: heading[1] });
    seen.add(anchor);
  });
  return repeated;
}
