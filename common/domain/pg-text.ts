// PostgreSQL text cannot hold U+0000, yet IDs and event names are free caller text.
// Lookup columns store an injective escape (`\` → `\\`, NUL → `\0`); the event's own
// payload (JSON, where NUL is written `\u0000`) keeps the exact value.

const NEEDS_ESCAPE = /[\\\0]/;
const ESCAPES = /[\\\0]/g;
const ESCAPED = /\\(\\|0)/g;

export function toPgText(value: string): string {
  return NEEDS_ESCAPE.test(value) ? value.replace(ESCAPES, (c) => (c === '\\' ? '\\\\' : '\\0')) : value;
}

export function fromPgText(value: string): string {
  return value.includes('\\') ? value.replace(ESCAPED, (_, c: string) => (c === '\\' ? '\\' : '\0')) : value;
}
