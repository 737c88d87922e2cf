// Journey size limits (spec, Limits): an event outside them is still stored and
// counted, but the worker lets it drive no journey.
import { hasId } from '../profiles/ids.ts';
import { isJsonContainer, resolveJsonValue } from '../platform/json-text.ts';

export const JOURNEY_LIMIT_BYTES = 131_072; // 128 KB for properties and IDs
export const JOURNEY_MAX_DEPTH = 100;

export type JourneyLimits = { within: true } | { within: false; reason: 'too_large' | 'too_deep' | 'null_character' };

const WITHIN: JourneyLimits = { within: true };
const TOO_LARGE: JourneyLimits = { within: false, reason: 'too_large' };
const TOO_DEEP: JourneyLimits = { within: false, reason: 'too_deep' };
const NULL_CHARACTER: JourneyLimits = { within: false, reason: 'null_character' };

const NULL_CHAR = '\u0000';

type Frame =
  | { array: true; value: unknown[]; index: number; depth: number }
  | { array: false; value: Record<string, unknown>; keys: string[]; index: number; depth: number; wrote: boolean };

// Size = UTF-8 bytes of stringifyJson(properties) + bytes of both IDs. It is
// summed while walking the properties in serialization order, so the walk can
// stop at the first exceeded limit instead of serializing first; properties
// may be nested far deeper than the call stack allows, hence the explicit stack.
//
// Reported reason: the first limit the walk runs into. IDs are counted before
// the walk; at each value the checks run null_character (keys and strings),
// then too_deep (containers), then too_large. So the reason for a given input
// is always the same, but it is not a global precedence. Cycles need no special
// handling: they exceed the depth limit.
export function checkJourneyLimits(e: { properties: unknown; userId: string | null; anonymousId: string | null }): JourneyLimits {
  let size = Buffer.byteLength(e.userId ?? '', 'utf8') + Buffer.byteLength(e.anonymousId ?? '', 'utf8');
  if (size > JOURNEY_LIMIT_BYTES) return TOO_LARGE;

  const stack: Frame[] = [];
  // The properties value itself is level 1.
  const first = visit(stack, resolveJsonValue('', e.properties), 1);
  if (typeof first !== 'number') return first;
  size += first;
  if (size > JOURNEY_LIMIT_BYTES) return TOO_LARGE;

  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    let value: unknown;
    if (frame.array) {
      if (frame.index >= frame.value.length) {
        stack.pop();
        continue;
      }
      const i = frame.index++;
      if (i > 0) size += 1; // comma
      value = resolveJsonValue(String(i), frame.value[i]);
    } else {
      if (frame.index >= frame.keys.length) {
        stack.pop();
        continue;
      }
      const key = frame.keys[frame.index++];
      value = resolveJsonValue(key, frame.value[key]);
      // Members JSON.stringify leaves out are not stored, so not checked either.
      if (isSkipped(value)) continue;
      if (key.includes(NULL_CHAR)) return NULL_CHARACTER;
      // comma (if not first), quoted key, colon
      size += (frame.wrote ? 1 : 0) + Buffer.byteLength(JSON.stringify(key), 'utf8') + 1;
      frame.wrote = true;
    }
    const bytes = visit(stack, value, frame.depth + 1);
    if (typeof bytes !== 'number') return bytes;
    size += bytes;
    if (size > JOURNEY_LIMIT_BYTES) return TOO_LARGE;
  }
  return WITHIN;
}

// Values JSON.stringify leaves out of objects (and writes as null in arrays).
function isSkipped(value: unknown): boolean {
  return value === undefined || typeof value === 'function' || typeof value === 'symbol';
}

// Bytes a value adds by itself (a container: its brackets; its members are
// counted as the walk reaches them), or the limit it breaks.
function visit(stack: Frame[], value: unknown, depth: number): number | JourneyLimits {
  if (isJsonContainer(value)) {
    if (depth > JOURNEY_MAX_DEPTH) return TOO_DEEP;
    pushContainer(stack, value, depth);
    return 2;
  }
  if (typeof value === 'string' && value.includes(NULL_CHAR)) return NULL_CHARACTER;
  return Buffer.byteLength(JSON.stringify(value) ?? 'null', 'utf8');
}

function pushContainer(stack: Frame[], value: object, depth: number): void {
  if (Array.isArray(value)) {
    stack.push({ array: true, value, index: 0, depth });
  } else {
    const record = value as Record<string, unknown>;
    stack.push({ array: false, value: record, keys: Object.keys(record), index: 0, depth, wrote: false });
  }
}

// Journeys look people up by userId; anonymous-only events never drive them.
export function mayDriveJourneys(e: { userId: string | null }, limits: JourneyLimits): boolean {
  return limits.within && hasId(e.userId);
}

/** What the events table records of an event for journeys (worker) and `events get` shows of a queued one. */
export function journeyEligibility(e: { properties: unknown; userId: string | null; anonymousId: string | null }): {
  withinLimits: boolean;
  limitReason: string | null;
  drivesJourneys: boolean;
} {
  const limits = checkJourneyLimits(e);
  return { withinLimits: limits.within, limitReason: limits.within ? null : limits.reason, drivesJourneys: mayDriveJourneys(e, limits) };
}
