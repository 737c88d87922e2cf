import test from 'ava';
import { overTrackLimit, storedSize, TRACK_EVENT_LIMIT_BYTES } from '../../events/track.ts';

const slow = (payload: string) => Buffer.byteLength(JSON.stringify(payload));

const equalsSlowFormula = test.macro({
  exec(t, value: unknown) {
    const payload = JSON.stringify(value);
    t.is(storedSize(payload), slow(payload));
  },
  title: (provided = '') => `storedSize equals the slow formula: ${provided}`,
});

test('ASCII', equalsSlowFormula, { type: 'track', event: 'Order Completed', properties: { total: 1 } });
test('empty object', equalsSlowFormula, {});
test('quotes', equalsSlowFormula, { q: 'say "hi" "" """' });
test('backslashes', equalsSlowFormula, { path: 'C:\\Users\\x\\\\', re: '\\d+' });
test('control characters (escaped by the inner stringify)', equalsSlowFormula, { s: 'a\nb\tc\u0000d\u001f' });
test('non-ASCII', equalsSlowFormula, { name: 'Zoë Łukasz 東京 Ελλάδα' });
test('astral characters', equalsSlowFormula, { emoji: '🙂👍🏽', math: '𝔸' });
test('lone surrogates (escaped by the inner stringify)', equalsSlowFormula, { s: '\ud800x\udfff' });
test('U+2028 and U+2029', equalsSlowFormula, { s: '\u2028\u2029' });
test('mixed', equalsSlowFormula, { 'k"\\é': ['"', '\\', 'é"\\🙂', null, 1.5e300, true] });

test('a string value of only quotes counts each quote four times', (t) => {
  // JSON.stringify turns each " into \" (2 bytes); embedding again gives \\\" (4 bytes).
  const payload = JSON.stringify('"'.repeat(100));
  t.is(storedSize(payload), 4 * 100 + 2 * 2 + 2);
});

test('near the limit, quotes push a body over it', (t) => {
  t.is(TRACK_EVENT_LIMIT_BYTES, 1_048_576);
  const plain = JSON.stringify({ s: 'a'.repeat(600_000) });
  const quoted = JSON.stringify({ s: '"'.repeat(600_000) });
  t.true(storedSize(plain) <= TRACK_EVENT_LIMIT_BYTES);
  t.true(storedSize(quoted) > TRACK_EVENT_LIMIT_BYTES);
  t.is(storedSize(quoted), slow(quoted));
});

test('overTrackLimit agrees with the measure on both sides of the limit, scanned or not', (t) => {
  // '€' is 3 UTF-8 bytes: 349,524 of them are the longest payload the shortcut decides unscanned.
  const cases = ['x'.repeat(1000), '€'.repeat(349_524), '€'.repeat(349_525), '"'.repeat(524_286), '"'.repeat(524_288), 'a'.repeat(1_048_575)];
  for (const payload of cases) t.is(overTrackLimit(payload), storedSize(payload) > TRACK_EVENT_LIMIT_BYTES, `${payload.length} units`);
  t.false(overTrackLimit('€'.repeat(349_524)));
  t.true(overTrackLimit('€'.repeat(349_525)));
  t.true(overTrackLimit('"'.repeat(524_288)));
});
