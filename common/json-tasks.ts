// The JSON work whose cost grows with a body's size and shape (parse, validate, measure,
// serialize, merge, compare), as pure functions of strings: json-pool.ts runs them on the
// caller's thread for small input and on a worker thread for large input, so a 4 MB body
// nested 2,000,000 levels deep or 500,000 keys wide never holds up the gateway's event loop.
// Inputs and results are strings and small flat objects, cheap to copy between threads; a
// parsed body never leaves the thread that parsed it.
import { overTrackLimit } from './domain/event-size.ts';
import { joinableEmail } from './domain/email.ts';
import { jsonEqual } from './domain/json-equal.ts';
import { stringifyJson } from './domain/json-text.ts';
import { storedTrackPayload } from './domain/track-payload.ts';
import { joinTraits, mergeTraits, type MergeResult, type TraitState } from './domain/trait-merge.ts';
import { randomUUID } from 'node:crypto';
import { planBatch, type IdentifyCall, type Plan, type Snapshot } from './store/identify-plan.ts';
import { checkIdentify, type IdentifyInput } from './validation/identify.ts';
import { checkTrack, type TrackEvent } from './validation/track.ts';

/** A Track event without its caller-shaped objects (those travel inside `storedPayload`). */
export type TrackHeader = Omit<TrackEvent, 'properties' | 'context' | 'integrations'>;

export type TrackDecoded =
  | { kind: 'ok'; track: TrackHeader; timestampMs: number; storedPayload: string }
  | { kind: 'notJson' }
  | { kind: 'tooLarge' }
  | { kind: 'invalid'; message: string };

/** `issues` as JSON text: a 4 MB body can hold millions of issues, too many to copy between threads as objects. */
export type IdentifyDecoded = { kind: 'ok'; input: IdentifyInput } | { kind: 'notJson' } | { kind: 'invalid'; issues: string } | { kind: 'tooFarAhead' };

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
  return 'issues' in result ? { kind: 'invalid', issues: stringifyJson(result.issues) } : { kind: 'tooFarAhead' };
}

/** An Identify batch's plan, or what the rules threw (by name: an Error's class does not cross threads). */
export type PlanOutcome = { kind: 'plan'; plan: Plan } | { kind: 'error'; name: string; message: string };

/** identify-plan.ts's planBatch on a snapshot of texts: the parse, merge and serialization of a batch. */
export function planIdentifyBatch(calls: IdentifyCall[], snap: Snapshot, now: number): PlanOutcome {
  try {
    return { kind: 'plan', plan: planBatch(calls, snap, now, randomUUID) };
  } catch (err) {
    const e = err instanceof Error ? err : new Error(String(err));
    return { kind: 'error', name: e.name, message: e.message };
  }
}

/** What json-pool.ts can run, by name. */
export const JSON_TASKS = { decodeTrack, decodeIdentify, planIdentifyBatch };
