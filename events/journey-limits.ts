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

/**
 * JSON.stringify writes at most this many bytes for one UTF-16 unit of the JSON text a value
 * was parsed from: a lone surrogate (one unit) is written `\uXXXX`; a number such as `9e20`
 * (4 units, 21 bytes) comes second; everything else writes no more than it was given.
 */
const MAX_BYTES_PER_UNIT = 6;
const LONGEST_PLAIN_TEXT = Math.floor(JOURNEY_LIMIT_BYTES / MAX_BYTES_PER_UNIT);

/**
 * Whether an event's JSON text (the stored payload it was parsed from) shows it within every
 * limit without the walk, which on ordinary events is most of a worker's CPU for an event:
 * - too_large: properties and IDs are disjoint parts of the text, so the measure is at most
 *   MAX_BYTES_PER_UNIT bytes a unit of it;
 * - null_character: JSON text can write a NUL in a key or a string only as `\u0000`;
 * - too_deep: a container at depth d has d opening brackets before it, the event's own besides.
 * Sufficient, not necessary (an escaped backslash before `u0000`, brackets inside strings): any
 * other text takes the walk.
 */
export function plainlyWithinLimits(text: string): boolean {
  if (text.length > LONGEST_PLAIN_TEXT || text.includes('\\u0000')) return false;
  const objects = occurrences(text, '{', JOURNEY_MAX_DEPTH);
  return objects + occurrences(text, '[', JOURNEY_MAX_DEPTH - objects) <= JOURNEY_MAX_DEPTH;
}

/** How many times `char` occurs in `text`, counted up to one past `limit`. */
function occurrences(text: string, char: string, limit: number): number {
  let n = 0;
  for (let i = text.indexOf(char); i !== -1 && n <= limit; i = text.indexOf(char, i + 1)) n++;
  return n;
}

/**
 * What the events table records of an event for journeys (worker) and `events get` shows of a
 * queued one. `text`: the JSON text `e` was parsed from, when there is one (plainlyWithinLimits).
 */
export function journeyEligibility(
  e: { properties: unknown; userId: string | null; anonymousId: string | null },
  text?: string,
): {
  withinLimits: boolean;
  limitReason: string | null;
  drivesJourneys: boolean;
} {
  const limits = text !== undefined && plainlyWithinLimits(text) ? WITHIN : checkJourneyLimits(e);
  return { withinLimits: limits.within, limitReason: limits.within ? null : limits.reason, drivesJourneys: mayDriveJourneys(e, limits) };
}
