// Track body validation. Reports only the first problem, in the spec's field
// order, with zod-style messages (the API's 400 texts are zod's wording).
import { hasId } from '../profiles/ids.ts';
import { NOT_JSON, parseJsonBody } from '../platform/json-text.ts';
import { storedTrackPayload } from './track-payload.ts';
import { SERVICE_EVENTS } from './service-events.ts';
import { parseTimestamp } from '../platform/validation/timestamp.ts';
import { messagesFor, receivedType, type JsonType } from '../platform/validation/received-type.ts';
import { isWellFormed, NOT_WELL_FORMED_MESSAGE } from '../platform/validation/well-formed.ts';

export interface TrackEvent {
  type: 'track';
  messageId: string;
  event: string;
  timestamp: string;
  userId: string | null;
  anonymousId: string | null;
  properties: Record<string, unknown>;
  context: Record<string, unknown>;
  integrations: Record<string, unknown>;
}

export type TrackCheck = { ok: true; event: TrackEvent; timestampMs: number } | { ok: false; message: string };

export const TRACK_MESSAGES = {
  invalidType: 'Invalid literal value, expected "track"',
  required: 'Required',
  emptyString: 'String must contain at least 1 character(s)',
  reservedEvent: 'Reserved event name',
  invalidDatetime: 'Invalid datetime',
  idRequired: 'At least one of userId or anonymousId is required',
  notWellFormed: NOT_WELL_FORMED_MESSAGE,
  expectedString: messagesFor('string'),
  expectedObject: messagesFor('object'),
} as const;

export const RESERVED_EVENT_NAMES: ReadonlySet<string> = new Set(Object.values(SERVICE_EVENTS));

function expected(table: Record<JsonType, string>, kind: string, v: unknown): string {
  const t = receivedType(v);
  // zod says "Required" for undefined; other non-JSON types cannot come from a JSON body.
  if (t === 'undefined') return TRACK_MESSAGES.required;
  return table[t as JsonType] ?? `Expected ${kind}, received ${t}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(message: string): TrackCheck {
  return { ok: false, message };
}

// Required non-empty string (messageId, event): message or null when fine.
function requiredStringProblem(v: unknown): string | null {
  if (typeof v === 'string') return v.length === 0 ? TRACK_MESSAGES.emptyString : null;
  return expected(TRACK_MESSAGES.expectedString, 'string', v);
}

// The messageId: a required non-empty string, and well-formed (well-formed.ts).
function messageIdProblem(v: unknown): string | null {
  return requiredStringProblem(v) ?? (isWellFormed(v as string) ? null : TRACK_MESSAGES.notWellFormed);
}

// Optional ID: absent and null are both fine; a string must be well-formed (well-formed.ts).
function idProblem(v: unknown): string | null {
  if (v === undefined || v === null) return null;
  if (typeof v === 'string') return isWellFormed(v) ? null : TRACK_MESSAGES.notWellFormed;
  return expected(TRACK_MESSAGES.expectedString, 'string', v);
}

// Optional object: absent is fine, null is not.
function objectProblem(v: unknown): string | null {
  if (v === undefined || isObject(v)) return null;
  return expected(TRACK_MESSAGES.expectedObject, 'object', v);
}

export function checkTrack(body: unknown): TrackCheck {
  if (!isObject(body)) return fail(expected(TRACK_MESSAGES.expectedObject, 'object', body));

  if (body.type !== 'track') return fail(TRACK_MESSAGES.invalidType);

  // The fields in product.md's order; the first problem is the answer.
  const { messageId, userId, anonymousId, event, timestamp, context, integrations, properties } = body;
  const problem = messageIdProblem(messageId) ?? idProblem(userId) ?? idProblem(anonymousId) ?? requiredStringProblem(event);
  if (problem !== null) return fail(problem);
  if (RESERVED_EVENT_NAMES.has(event as string)) return fail(TRACK_MESSAGES.reservedEvent);

  if (typeof timestamp !== 'string') {
    return fail(expected(TRACK_MESSAGES.expectedString, 'string', timestamp));
  }
  const parsed = parseTimestamp(timestamp);
  if (!parsed.ok) return fail(TRACK_MESSAGES.invalidDatetime);

  const objectsProblem = objectProblem(context) ?? objectProblem(integrations) ?? objectProblem(properties);
  if (objectsProblem !== null) return fail(objectsProblem);

  const user = (userId as string | null | undefined) ?? null;
  const anonymous = (anonymousId as string | null | undefined) ?? null;
  if (!hasId(user) && !hasId(anonymous)) return fail(TRACK_MESSAGES.idRequired);

  return {
    ok: true,
    timestampMs: parsed.ms,
    event: {
      type: 'track',
      messageId: messageId as string,
      event: event as string,
      timestamp,
      userId: user,
      anonymousId: anonymous,
      properties: (properties as Record<string, unknown> | undefined) ?? {},
      context: (context as Record<string, unknown> | undefined) ?? {},
      integrations: (integrations as Record<string, unknown> | undefined) ?? {},
    },
  };
}

/** A Track event without its caller-shaped objects (those travel inside `storedPayload`). */
export type TrackHeader = Omit<TrackEvent, 'properties' | 'context' | 'integrations'>;

export type TrackDecoded =
  | { kind: 'ok'; track: TrackHeader; timestampMs: number; storedPayload: string }
  | { kind: 'notJson' }
  | { kind: 'tooLarge' }
  | { kind: 'invalid'; message: string };

/** Track's check 6 in order: JSON, then the size of the event as stored (413), then the fields. */
export function decodeTrack(raw: string): TrackDecoded {
  const body = parseJsonBody(raw);
  if (body === NOT_JSON) return { kind: 'notJson' };
  const storedPayload = storedTrackPayload(body);
  if (overTrackLimit(storedPayload)) return { kind: 'tooLarge' };
  const result = checkTrack(body);
  if (!result.ok) return { kind: 'invalid', message: result.message };
  const { type, messageId, event, timestamp, userId, anonymousId } = result.event;
  return { kind: 'ok', track: { type, messageId, event, timestamp, userId, anonymousId }, timestampMs: result.timestampMs, storedPayload };
}

// The size measure. The stored event (a JSON string) is embedded as a
// string inside the queue job's JSON, so every `"` and `\` is escaped again:
// that is why the spec says the measure "counts more than the raw body".

export const TRACK_EVENT_LIMIT_BYTES = 1_048_576;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

// Equals Buffer.byteLength(JSON.stringify(payload)) without building a second
// ~1 MB string. Valid only for JSON.stringify output: it holds no raw control
// characters or lone surrogates, so `"` and `\` are the only characters that
// JSON.stringify would escape (each to two bytes).
export function storedSize(payload: string): number {
  let escapes = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = payload.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH) escapes++;
  }
  return Buffer.byteLength(payload, 'utf8') + escapes + 2;
}

/**
 * Whether the stored event is over the Track limit. A UTF-16 unit is at most 3 UTF-8 bytes and
 * an escaped one (`"` or `\`) only 2, so a payload this short is under the limit unscanned.
 */
export function overTrackLimit(payload: string): boolean {
  if (payload.length * 3 + 2 <= TRACK_EVENT_LIMIT_BYTES) return false;
  return storedSize(payload) > TRACK_EVENT_LIMIT_BYTES;
}
