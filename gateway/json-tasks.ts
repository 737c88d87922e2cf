// The JSON work whose cost grows with a body's size and shape (parse, validate, measure,
// serialize, merge, compare), as pure functions of strings: json-pool.ts runs them on the
// caller's thread for small input and on a worker thread for large input, so a 4 MB body
// nested 2,000,000 levels deep or 500,000 keys wide never holds up the gateway's event loop.
// Inputs and results are strings and small flat objects, cheap to copy between threads; a
// parsed body never leaves the thread that parsed it.
import { overTrackLimit } from '../events/event-size.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { storedTrackPayload } from '../events/track-payload.ts';
import { planIdentifyBatch } from '../identify/identify-plan.ts';
import { checkIdentify, type IdentifyInput } from '../identify/validation.ts';
import type { Issue } from '../platform/validation/issues.ts';
import { checkTrack, type TrackEvent } from '../events/track.ts';

/** A Track event without its caller-shaped objects (those travel inside `storedPayload`). */
export type TrackHeader = Omit<TrackEvent, 'properties' | 'context' | 'integrations'>;

export type TrackDecoded =
  | { kind: 'ok'; track: TrackHeader; timestampMs: number; storedPayload: string }
  | { kind: 'notJson' }
  | { kind: 'tooLarge' }
  | { kind: 'invalid'; message: string };

/**
 * `issues` as JSON text: a 4 MB body can hold millions of issues, too many to copy between
 * threads as objects. `first` is the first of them, for the request log.
 */
export type IdentifyDecoded =
  { kind: 'ok'; input: IdentifyInput } | { kind: 'notJson' } | { kind: 'invalid'; issues: string; first: Issue } | { kind: 'tooFarAhead' };

const NOT_JSON = Symbol('not JSON');

// Any JSON value (validation names a scalar's type); an empty body is not JSON. A `__proto__`
// key is ordinary data: JSON.parse makes it an own property.
function parseBody(raw: string): unknown {
  if (raw === '') return NOT_JSON;
  try {
    return JSON.parse(raw);
  } catch {
    return NOT_JSON;
  }
}

/** Track's check 6 in order: JSON, then the size of the event as stored (413), then the fields. */
export function decodeTrack(raw: string): TrackDecoded {
  const body = parseBody(raw);
  if (body === NOT_JSON) return { kind: 'notJson' };
  const storedPayload = storedTrackPayload(body);
  if (overTrackLimit(storedPayload)) return { kind: 'tooLarge' };
  const result = checkTrack(body);
  if (!result.ok) return { kind: 'invalid', message: result.message };
  const { type, messageId, event, timestamp, userId, anonymousId } = result.event;
  return { kind: 'ok', track: { type, messageId, event, timestamp, userId, anonymousId }, timestampMs: result.timestampMs, storedPayload };
}

/** Identify's check 6: JSON, then every issue of the fields. */
export function decodeIdentify(raw: string, receivedAt: number): IdentifyDecoded {
  const body = parseBody(raw);
  if (body === NOT_JSON) return { kind: 'notJson' };
  const result = checkIdentify(body, receivedAt);
  if (result.ok) return { kind: 'ok', input: result.input };
  return 'issues' in result ? { kind: 'invalid', issues: stringifyJson(result.issues), first: result.issues[0] } : { kind: 'tooFarAhead' };
}

/** What json-pool.ts can run, by name. */
export const JSON_TASKS = { decodeTrack, decodeIdentify, planIdentifyBatch };
