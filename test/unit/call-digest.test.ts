import test from 'ava';
import fc from 'fast-check';
import { callDigest, canonicalJson, repeatVerdict } from '../../identify/call-digest.ts';
import { jsonEqual } from '../../platform/json-equal.ts';

/** The value with every object's keys in reverse order (equal as JSON, written differently). */
function reordered(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(reordered);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).reverse())
    Object.defineProperty(out, key, { value: reordered((value as Record<string, unknown>)[key]), enumerable: true });
  return out;
}

test('canonical text: keys sorted at every level, arrays in order, values as JSON writes them', (t) => {
  t.is(canonicalJson({ b: 1, a: { d: [3, { z: null, y: 'é\u0000' }], c: true } }), '{"a":{"c":true,"d":[3,{"y":"é\\u0000","z":null}]},"b":1}');
  t.is(canonicalJson([]), '[]');
  t.is(canonicalJson({}), '{}');
  t.is(canonicalJson(JSON.parse('{"__proto__":{"x":1},"a":-0}')), '{"__proto__":{"x":1},"a":0}');
  t.is(canonicalJson('\ud800'), '"\\ud800"');
});

test('canonical text of a value nested deeper than the stack', (t) => {
  const depth = 200_000;
  const text = `${'[{"k":'.repeat(depth)}1${'}]'.repeat(depth)}`;
  t.is(canonicalJson(JSON.parse(text)), text);
});

test('two calls have one digest exactly when userId, timestamp and traits (key order aside) are equal', (t) => {
  const traits = fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });
  const call = fc.record({ userId: fc.constantFrom('u', 'u2', '"u"', 'u\n1'), ts: fc.constantFrom(null, 0, 1, 1700000000000), traits });
  fc.assert(
    fc.property(call, call, fc.boolean(), (a, b, reorder) => {
      const bTraits = reorder ? reordered(b.traits) : b.traits;
      const same = a.userId === b.userId && a.ts === b.ts && jsonEqual(a.traits, b.traits);
      return (callDigest(a.userId, a.ts, a.traits) === callDigest(b.userId, b.ts, bTraits)) === same;
    }),
    { numRuns: 2000 },
  );
  // The same call, keys reordered: one digest.
  fc.assert(fc.property(call, (a) => callDigest(a.userId, a.ts, a.traits) === callDigest(a.userId, a.ts, reordered(a.traits))));
  t.pass('both properties held');
});

test('a timestamp present in one call and absent in the other makes them different; so does a userId that only looks alike', (t) => {
  t.not(callDigest('u', null, {}), callDigest('u', 0, {}));
  t.not(callDigest('u\n1', null, {}), callDigest('u', 1, {}));
  t.regex(callDigest('u', null, {}), /^-?\d+$/);
});

test("a messageId's later call: the same digest is a duplicate, any other a conflict", (t) => {
  const first = callDigest('u1', 1000, { plan: 'pro', seats: 3 });
  t.is(repeatVerdict(first, callDigest('u1', 1000, { seats: 3, plan: 'pro' })), 'duplicate');
  t.is(repeatVerdict(first, callDigest('u1', 1001, { plan: 'pro', seats: 3 })), 'conflict');
  t.is(repeatVerdict(first, callDigest('u2', 1000, { plan: 'pro', seats: 3 })), 'conflict');
});
