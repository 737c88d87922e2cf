// What the spec says Track answers for a parsed body, from its text alone: the fields in the
// spec's order, the first problem only, with the messages of its tables (zod's wording for
// the type mismatches it lists one example of). `Reserved event name` and the refusal of IDs
// with an unpaired surrogate are docs/decisions.md's.
import { specTimestamp } from './spec-timestamp.ts';

export type Expectation = { kind: 'accepted' } | { kind: 'error'; status: number; body: Record<string, unknown> } | { kind: 'unknown' };

const RESERVED = new Set(['profile_fields_changed', 'subscription_changed']);
const ASCII_BLANK = /^[ \t\n\r]*$/;
/** With the `u` flag a paired surrogate is one code point, so \p{Cs} matches only unpaired ones. */
const UNPAIRED_SURROGATE = /\p{Cs}/u;
const NOT_WELL_FORMED = 'String must be well-formed Unicode (no unpaired surrogate)';
const JS_BLANK = /^\s*$/;

const jsonType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const typeMessage = (expected: string, v: unknown) => (v === undefined ? 'Required' : `Expected ${expected}, received ${jsonType(v)}`);
const fail = (error: string): Expectation[] => [{ kind: 'error', status: 400, body: { error } }];

/** Every answer the spec allows for this body (one, unless the spec leaves the case open). */
export function specTrack(body: unknown): Expectation[] {
  if (!isObject(body)) return fail(typeMessage('object', body));
  if (body.type !== 'track') return fail('Invalid literal value, expected "track"');
  const requiredString = (v: unknown) => (typeof v === 'string' ? (v === '' ? 'String must contain at least 1 character(s)' : null) : typeMessage('string', v));
  const optionalId = (v: unknown) => (v === undefined || v === null || typeof v === 'string' ? null : typeMessage('string', v));
  const optionalObject = (v: unknown) => (v === undefined || isObject(v) ? null : typeMessage('object', v));
  const wellFormed = (v: unknown) => (typeof v === 'string' && UNPAIRED_SURROGATE.test(v) ? NOT_WELL_FORMED : null);
  const id = (problem: string | null, v: unknown) => problem ?? wellFormed(v);

  for (const problem of [
    id(requiredString(body.messageId), body.messageId),
    id(optionalId(body.userId), body.userId),
    id(optionalId(body.anonymousId), body.anonymousId),
    requiredString(body.event),
  ]) {
    if (problem) return fail(problem);
  }
  if (RESERVED.has(body.event as string)) return fail('Reserved event name');
  if (typeof body.timestamp !== 'string') return fail(typeMessage('string', body.timestamp));
  const verdict = specTimestamp(body.timestamp);
  if (verdict !== 'unknown' && !verdict.ok) return fail('Invalid datetime');
  const rest = afterTimestamp(body);
  return verdict === 'unknown' ? [...fail('Invalid datetime'), ...rest] : rest;

  function afterTimestamp(b: Record<string, unknown>): Expectation[] {
    for (const problem of [optionalObject(b.context), optionalObject(b.integrations), optionalObject(b.properties)]) {
      if (problem) return fail(problem);
    }
    // "Empty or whitespace-only counts as absent": ASCII blanks surely, other Unicode spaces either way.
    const present = (v: unknown) => (typeof v !== 'string' || ASCII_BLANK.test(v) ? 'no' : JS_BLANK.test(v) ? 'maybe' : 'yes');
    const ids = [present(b.userId), present(b.anonymousId)];
    if (ids.includes('yes')) return [{ kind: 'accepted' }];
    const missing = fail('At least one of userId or anonymousId is required');
    return ids.includes('maybe') ? [...missing, { kind: 'accepted' }] : missing;
  }
}
