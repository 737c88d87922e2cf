import test from 'ava';
import {
  checkJourneyLimits,
  journeyEligibility,
  JOURNEY_LIMIT_BYTES,
  JOURNEY_MAX_DEPTH,
  mayDriveJourneys,
  plainlyWithinLimits,
} from '../../events/journey-limits.ts';
import type { JourneyLimits } from '../../events/journey-limits.ts';
import { stringifyJson } from '../../platform/json-text.ts';

const WITHIN: JourneyLimits = { within: true };
const TOO_LARGE: JourneyLimits = { within: false, reason: 'too_large' };
const TOO_DEEP: JourneyLimits = { within: false, reason: 'too_deep' };
const NULL_CHARACTER: JourneyLimits = { within: false, reason: 'null_character' };

const check = (properties: unknown, userId: string | null = 'user-1', anonymousId: string | null = null) =>
  checkJourneyLimits({ properties, userId, anonymousId });

// The oracle: the spec's measure computed the slow way.
const sizeOf = (properties: unknown, userId: string | null, anonymousId: string | null) =>
  Buffer.byteLength(stringifyJson(properties)) + Buffer.byteLength(userId ?? '') + Buffer.byteLength(anonymousId ?? '');

// Pads `build('')` with ASCII so the measure is exactly `target` bytes.
function padTo(target: number, build: (pad: string) => unknown, userId: string | null, anonymousId: string | null) {
  const base = sizeOf(build(''), userId, anonymousId);
  return build('x'.repeat(target - base));
}

function nestedObjects(levels: number): unknown {
  let v: unknown = {};
  for (let i = 1; i < levels; i++) v = { a: v };
  return v;
}

test('constants', (t) => {
  t.is(JOURNEY_LIMIT_BYTES, 131_072);
  t.is(JOURNEY_MAX_DEPTH, 100);
});

test('small events are within', (t) => {
  t.deepEqual(check({}), WITHIN);
  t.deepEqual(check({ plan: 'pro', total: 12.5, items: [{ sku: 'a' }], ok: true, none: null }), WITHIN);
});

test('exactly 128 KB is within, one byte more is too large', (t) => {
  const build = (pad: string) => ({ s: pad });
  const exact = padTo(JOURNEY_LIMIT_BYTES, build, 'user-1', 'anon-1');
  t.is(sizeOf(exact, 'user-1', 'anon-1'), JOURNEY_LIMIT_BYTES);
  t.deepEqual(check(exact, 'user-1', 'anon-1'), WITHIN);
  const over = padTo(JOURNEY_LIMIT_BYTES + 1, build, 'user-1', 'anon-1');
  t.deepEqual(check(over, 'user-1', 'anon-1'), TOO_LARGE);
});

test('the boundary holds with escapes, non-ASCII, numbers and skipped members', (t) => {
  const build = (pad: string) => ({
    'k"é\\': ['é"\\\n', 1.5e-7, -0, NaN, true, null, undefined, () => 1, { deep: [[{}]] }],
    skipped: undefined,
    '🙂': new Date(0),
    pad,
  });
  for (const [userId, anonymousId] of [
    ['ü-user', null],
    [null, 'ànon'],
    ['  ', ''],
  ] as const) {
    const exact = padTo(JOURNEY_LIMIT_BYTES, build, userId, anonymousId);
    t.is(sizeOf(exact, userId, anonymousId), JOURNEY_LIMIT_BYTES);
    t.deepEqual(check(exact, userId, anonymousId), WITHIN);
    t.deepEqual(check(padTo(JOURNEY_LIMIT_BYTES + 1, build, userId, anonymousId), userId, anonymousId), TOO_LARGE);
  }
});

// Random JSON values, each padded to the exact boundary: the walk's byte count
// must agree with the serialized size for every shape.
function randomJson(rand: () => number, depth: number): unknown {
  const r = rand();
  if (depth > 4 || r < 0.4) {
    const leaves = [null, true, false, 0, -1.25, 1e21, 'plain', 'é"\\\t🙂', '', '\u2028'];
    return leaves[Math.floor(rand() * leaves.length)];
  }
  const n = Math.floor(rand() * 4);
  if (r < 0.7) return Array.from({ length: n }, () => randomJson(rand, depth + 1));
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) o[['a', '1', 'ké"', '\\', ''][Math.floor(rand() * 5)] + i] = randomJson(rand, depth + 1);
  return o;
}

test('size agrees with the serialized size on random shapes', (t) => {
  let seed = 12345;
  const rand = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let i = 0; i < 200; i++) {
    const v = randomJson(rand, 0);
    const build = (pad: string) => ({ v, pad });
    t.deepEqual(check(padTo(JOURNEY_LIMIT_BYTES, build, 'u', null), 'u', null), WITHIN, JSON.stringify(v));
    t.deepEqual(check(padTo(JOURNEY_LIMIT_BYTES + 1, build, 'u', null), 'u', null), TOO_LARGE, JSON.stringify(v));
  }
});

test('IDs count toward the size, in UTF-8 bytes', (t) => {
  t.deepEqual(check({}, 'é'.repeat((JOURNEY_LIMIT_BYTES - 2) / 2), null), WITHIN);
  t.deepEqual(check({}, 'é'.repeat((JOURNEY_LIMIT_BYTES - 2) / 2) + 'x', null), TOO_LARGE);
  t.deepEqual(check({}, 'u'.repeat(70_000), 'a'.repeat(70_000)), TOO_LARGE);
  t.deepEqual(check({}, null, 'a'.repeat(JOURNEY_LIMIT_BYTES + 1)), TOO_LARGE);
});

test('depth: the properties object is level 1; 100 levels within, 101 too deep', (t) => {
  t.deepEqual(check(nestedObjects(1)), WITHIN); // {}
  t.deepEqual(check(nestedObjects(JOURNEY_MAX_DEPTH)), WITHIN);
  t.deepEqual(check(nestedObjects(JOURNEY_MAX_DEPTH + 1)), TOO_DEEP);
});

test('depth: arrays are levels too', (t) => {
  // {a:[{}]} is 3 levels: 97 more wrappers make 100.
  let v: unknown = { a: [{}] };
  for (let i = 0; i < 97; i++) v = { a: v };
  t.deepEqual(check(v), WITHIN);
  t.deepEqual(check({ a: v }), TOO_DEEP);
  t.deepEqual(check({ a: [v] }), TOO_DEEP);
  let arrays: unknown = [];
  for (let i = 0; i < JOURNEY_MAX_DEPTH - 2; i++) arrays = [arrays];
  t.deepEqual(check({ list: arrays }), WITHIN); // 1 + 99 levels
  t.deepEqual(check({ list: [arrays] }), TOO_DEEP);
});

test('depth: leaves do not add a level', (t) => {
  t.deepEqual(check({ a: nestedObjects(JOURNEY_MAX_DEPTH - 1), s: 'x', n: 1 }), WITHIN);
  let v: unknown = { leaf: 'x' };
  for (let i = 1; i < JOURNEY_MAX_DEPTH; i++) v = { a: v, b: 2 };
  t.deepEqual(check(v), WITHIN);
});

test('200,000 levels: too deep, without overflowing the stack', (t) => {
  t.deepEqual(check(nestedObjects(200_000)), TOO_DEEP);
  let arrays: unknown = [];
  for (let i = 0; i < 200_000; i++) arrays = [arrays];
  t.deepEqual(check({ a: arrays }), TOO_DEEP);
  // A parsed body of that depth as well.
  t.deepEqual(check(JSON.parse('{"a":'.repeat(200_000) + '1' + '}'.repeat(200_000))), TOO_DEEP);
});

test('a cycle is reported as too deep', (t) => {
  const o: Record<string, unknown> = {};
  o.self = o;
  t.deepEqual(check(o), TOO_DEEP);
});

test('null character in a string value, anywhere', (t) => {
  t.deepEqual(check({ s: 'a\u0000b' }), NULL_CHARACTER);
  t.deepEqual(check({ s: '\u0000' }), NULL_CHARACTER);
  t.deepEqual(check({ list: ['ok', ['x\u0000']] }), NULL_CHARACTER);
  t.deepEqual(check({ a: nestedObjects(50), b: { c: { d: 'end\u0000' } } }), NULL_CHARACTER);
});

test('null character in a key, anywhere', (t) => {
  t.deepEqual(check({ 'k\u0000': 1 }), NULL_CHARACTER);
  t.deepEqual(check({ a: [{ '\u0000': null }] }), NULL_CHARACTER);
});

test('look-alikes of the null character are fine', (t) => {
  t.deepEqual(check({ s: '\\u0000', k: '\u0001', z: '0' }), WITHIN);
  // IDs are not part of the null-character rule.
  t.deepEqual(check({}, 'u\u0000', null), WITHIN);
});

test('reason is the first limit the walk meets, in serialization order', (t) => {
  const big = 'x'.repeat(JOURNEY_LIMIT_BYTES);
  t.deepEqual(check({ n: '\u0000', big }), NULL_CHARACTER);
  t.deepEqual(check({ big, n: '\u0000' }), TOO_LARGE);
  t.deepEqual(check({ deep: nestedObjects(200), n: '\u0000' }), TOO_DEEP);
  t.deepEqual(check({ n: '\u0000', deep: nestedObjects(200) }), NULL_CHARACTER);
  // IDs are counted before the walk.
  t.deepEqual(check({ n: '\u0000' }, 'u'.repeat(JOURNEY_LIMIT_BYTES + 1)), TOO_LARGE);
  // Same input, same reason.
  t.deepEqual(check({ big, n: '\u0000' }), check({ big, n: '\u0000' }));
});

test('mayDriveJourneys needs both the limits and a userId with content', (t) => {
  t.true(mayDriveJourneys({ userId: 'u' }, WITHIN));
  t.true(mayDriveJourneys({ userId: ' u ' }, WITHIN));
  t.false(mayDriveJourneys({ userId: null }, WITHIN));
  t.false(mayDriveJourneys({ userId: '' }, WITHIN));
  t.false(mayDriveJourneys({ userId: ' \t' }, WITHIN));
  t.false(mayDriveJourneys({ userId: 'u' }, TOO_LARGE));
  t.false(mayDriveJourneys({ userId: 'u' }, TOO_DEEP));
  t.false(mayDriveJourneys({ userId: 'u' }, NULL_CHARACTER));
});

// plainlyWithinLimits: what a worker reads off an event's stored text before walking it.

/** An event's text as a payload stores it, with `properties` written as given (raw JSON text). */
const eventText = (propertiesText: string, userId = 'user-1') =>
  `{"type":"track","messageId":"m-1","event":"Order Completed","userId":${JSON.stringify(userId)},"anonymousId":null,"timestamp":"2026-01-01T10:00:00.000Z","properties":${propertiesText},"context":{},"integrations":{}}`;

/** The walk's verdict on the event a text holds. */
const walked = (text: string) => {
  const e = JSON.parse(text) as { properties: unknown; userId: string | null; anonymousId: string | null };
  return checkJourneyLimits(e);
};

/** The longest text the shortcut takes, and the filler that brings a text to `length` units. */
const LONGEST = Math.floor(JOURNEY_LIMIT_BYTES / 6);
const fillTo = (length: number, around: (filler: string) => string) => around('x'.repeat(length - around('').length));

test('an ordinary event is plainly within the limits, without the walk', (t) => {
  const text = eventText('{"plan":"pro","price":49.5,"items":[{"sku":"A-100","qty":2}],"referrer":"https://example.com/?utm_source=news"}');
  t.true(plainlyWithinLimits(text));
  t.deepEqual(walked(text), WITHIN);
});

test('the shortcut holds where serialization writes the most for the text: lone surrogates and long-written numbers', (t) => {
  // A lone surrogate is one unit of text and six bytes as serialized: the worst case.
  const exact = eventText(`{"s":"${'\ud800'.repeat(LONGEST - eventText('{"s":""}').length)}"}`);
  t.is(exact.length, LONGEST);
  t.true(plainlyWithinLimits(exact));
  t.deepEqual(walked(exact), WITHIN);
  // `9e20` is four units and 21 bytes as serialized.
  const numbers = eventText(`[${Array.from({ length: Math.floor((LONGEST - eventText('[]').length) / 5) }, () => '9e20').join(',')}]`);
  t.true(plainlyWithinLimits(numbers));
  t.deepEqual(walked(numbers), WITHIN);
  // One unit longer is the walk's to judge, whatever it holds.
  t.false(plainlyWithinLimits(fillTo(LONGEST + 1, (f) => eventText(`{"s":"${f}"}`))));
  t.deepEqual(walked(fillTo(LONGEST + 1, (f) => eventText(`{"s":"${f}"}`))), WITHIN);
});

test('a NUL written in the text, or anything like it, goes to the walk', (t) => {
  const nul = eventText('{"s":"a\\u0000b"}');
  t.false(plainlyWithinLimits(nul));
  t.deepEqual(walked(nul), NULL_CHARACTER);
  const key = eventText('{"a\\u0000":1}');
  t.false(plainlyWithinLimits(key));
  t.deepEqual(walked(key), NULL_CHARACTER);
  // An escaped backslash before `u0000` is no NUL: the walk finds it within.
  const lookalike = eventText('{"s":"\\\\u0000"}');
  t.false(plainlyWithinLimits(lookalike));
  t.deepEqual(walked(lookalike), WITHIN);
});

test('nesting up to the depth limit counted in brackets: deeper, or brackets inside strings, go to the walk', (t) => {
  const nested = (levels: number) => eventText(stringifyJson(nestedObjects(levels)));
  // Every opening bracket of the text counts: the event's own, its context's and integrations'.
  t.true(plainlyWithinLimits(nested(JOURNEY_MAX_DEPTH - 3)));
  t.deepEqual(walked(nested(JOURNEY_MAX_DEPTH - 3)), WITHIN);
  t.false(plainlyWithinLimits(nested(JOURNEY_MAX_DEPTH - 2)));
  t.deepEqual(walked(nested(JOURNEY_MAX_DEPTH)), WITHIN);
  t.false(plainlyWithinLimits(nested(JOURNEY_MAX_DEPTH + 1)));
  t.deepEqual(walked(nested(JOURNEY_MAX_DEPTH + 1)), TOO_DEEP);
  const inStrings = eventText(`{"s":"${'['.repeat(JOURNEY_MAX_DEPTH)}"}`);
  t.false(plainlyWithinLimits(inStrings));
  t.deepEqual(walked(inStrings), WITHIN);
});

test('with its text or without it, an event gets the same eligibility (seeded random events)', (t) => {
  let seed = 41;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)];
  // As written inside a JSON string: raw characters, a raw lone surrogate, and escapes.
  const strings = ['', 'a', 'é', '😀', '\ud800', '\\"', '\\\\', '\\u0000', '\\u0001', '\\ud800', '[', '{', 'x'.repeat(2000)];
  const value = (depth: number): string => {
    const kind = random();
    if (depth > 0 && kind < 0.25)
      return `{${Array.from({ length: Math.floor(random() * 4) }, (_, i) => `"${pick(strings)}${i}":${value(depth - 1)}`).join(',')}}`;
    if (depth > 0 && kind < 0.45) return `[${Array.from({ length: Math.floor(random() * 4) }, () => value(depth - 1)).join(',')}]`;
    if (kind < 0.7) return `"${pick(strings)}"`;
    return pick(['0', '-1.5', '9e20', '1e-7', 'true', 'false', 'null']);
  };
  let plain = 0;
  for (let i = 0; i < 3000; i++) {
    const text = eventText(value(1 + Math.floor(random() * 8)), pick(['user-1', 'ü'.repeat(100)]));
    const event = JSON.parse(text) as { properties: unknown; userId: string | null; anonymousId: string | null };
    if (plainlyWithinLimits(text)) plain++;
    t.deepEqual(journeyEligibility(event, text), journeyEligibility(event), text.slice(0, 200));
  }
  // Both kinds were met: the shortcut's and the walk's.
  t.true(plain >= 100 && 3000 - plain >= 100, `${plain} of 3000 plainly within`);
});
