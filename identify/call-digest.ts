// Identify's idempotency rule: a messageId used again with the same userId, timestamp and
// traits (object key order aside) is a duplicate retry, with anything different a conflict
// (409). What the first call was is kept as a 64-bit digest of those three parts
// (identify_messages.call_digest), not as the parts themselves: a claim row is then a third of
// the size, and so is the write-ahead log it costs every call (docs/performance.md). Two calls
// are the same exactly when their digests are equal, unless SHA-256's first 64 bits collide
// for two calls under one messageId of one environment.
import { hash } from 'node:crypto';
import { int8OfHex } from '../platform/identity-hash.ts';

/** The digest, as the decimal text of a signed 64-bit integer (an int8 column's value). */
export function callDigest(userId: string, timestampMs: number | null, traits: unknown): string {
  // JSON.stringify quotes the userId (no separator inside it can be mistaken for the next part)
  // and escapes an unpaired surrogate, which UTF-8 could not hash apart from U+FFFD.
  const text = `${JSON.stringify(userId)}\n${timestampMs ?? '-'}\n${canonicalJson(traits)}`;
  return int8OfHex(hash('sha256', text, 'hex'));
}

/** A messageId's later call weighed against its first: the same call again, or a conflict (409). */
export function repeatVerdict(firstDigest: string, digest: string): 'duplicate' | 'conflict' {
  return firstDigest === digest ? 'duplicate' : 'conflict';
}

class Token {
  constructor(readonly text: string) {}
}
const CLOSE_OBJECT = new Token('}');
const CLOSE_ARRAY = new Token(']');
const COMMA = new Token(',');

/**
 * A JSON value (as JSON.parse returns it) as JSON text with every object's keys sorted, so two
 * values equal but for key order have one text. Iterative: traits may nest deeper than the stack.
 */
export function canonicalJson(value: unknown): string {
  if (isFlatObject(value)) return JSON.stringify(value, Object.keys(value).sort());
  let out = '';
  const todo: unknown[] = [value];
  while (todo.length) {
    const v = todo.pop();
    if (v instanceof Token) out += v.text;
    else if (typeof v !== 'object' || v === null) out += JSON.stringify(v);
    else if (Array.isArray(v)) {
      out += '[';
      todo.push(CLOSE_ARRAY);
      for (let i = v.length - 1; i >= 0; i--) {
        todo.push(v[i]);
        if (i > 0) todo.push(COMMA);
      }
    } else {
      out += '{';
      todo.push(CLOSE_OBJECT);
      const keys = Object.keys(v).sort();
      for (let i = keys.length - 1; i >= 0; i--) {
        todo.push((v as Record<string, unknown>)[keys[i]]);
        todo.push(new Token(`${i > 0 ? ',' : ''}${JSON.stringify(keys[i])}:`));
      }
    }
  }
  return out;
}

/**
 * An object none of whose values is an object or array (most traits): JSON.stringify with its
 * keys sorted as the property list writes it canonically, natively and in one pass.
 */
function isFlatObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    if (typeof v === 'object' && v !== null) return false;
  }
  return true;
}
