// PostgreSQL text cannot hold U+0000 (and UTF-8 cannot hold an unpaired UTF-16 surrogate,
// which the driver would silently turn into U+FFFD), yet IDs and event names are free caller
// text. Lookup columns store an injective escape (`\` → `\\`, NUL → `\0`, a lone surrogate →
// `\uXXXX`); the event's own payload (JSON, where both are written as `\u` escapes) keeps the
// exact value.

const NEEDS_ESCAPE = /[\\\0\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const ESCAPES = new RegExp(`[\\\\\\0]|${LONE_SURROGATE.source}`, 'g');
const ESCAPED = /\\(\\|0|u[0-9a-f]{4})/g;

export function toPgText(value: string): string {
  if (!NEEDS_ESCAPE.test(value)) return value;
  return value.replace(ESCAPES, (c) => (c === '\\' ? '\\\\' : c === '\0' ? '\\0' : `\\u${c.charCodeAt(0).toString(16)}`));
}

export function fromPgText(value: string): string {
  if (!value.includes('\\')) return value;
  return value.replace(ESCAPED, (_, c: string) => (c === '\\' ? '\\' : c === '0' ? '\0' : String.fromCharCode(parseInt(c.slice(1), 16))));
}

/** Whether text goes to PostgreSQL unchanged: no NUL and no unpaired surrogate. */
export function isPlainText(value: string): boolean {
  return !NEEDS_ESCAPE.test(value) || (!value.includes('\0') && !LONE_SURROGATE.test(value));
}
