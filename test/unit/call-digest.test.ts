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

test('a digest is the one stored before: first 64 bits of SHA-256, signed (identify_messages.call_digest outlives a release)', (t) => {
  t.is(callDigest('u1', 1000, { plan: 'pro', seats: 3 }), '8330263649830062814');
  t.is(callDigest('ü\u0000"', null, { b: 'é', a: -0, c: null, d: true, e: 1e21 }), '-3280521370295155832');
  t.is(callDigest('u', null, { z: [1, { y: 2, x: 1 }] }), '-8247613286683757181');
});

/** Canonical text written the plain recursive way: what canonicalJson writes, at any shape. */
function sortedJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(sortedJson).join(',')}]`;
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  const o = value as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${sortedJson(o[k])}`)
    .join(',')}}`;
}

test('canonical text of flat traits (the one-pass path) and of nested ones is the recursive definition', (t) => {
  const flat = fc.dictionary(fc.string({ maxLength: 4 }), fc.oneof(fc.string(), fc.double(), fc.integer(), fc.boolean(), fc.constant(null)), { maxKeys: 8 });
  const nested = fc.dictionary(fc.string({ maxLength: 4 }), fc.jsonValue({ maxDepth: 3 }), { maxKeys: 5 });
  // Through JSON text, as traits arrive: own keys only, "__proto__" and integer-like keys among them.
  const parsed = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;
  fc.assert(
    fc.property(fc.oneof(flat, nested), (v) => canonicalJson(parsed(v)) === sortedJson(parsed(v))),
    { numRuns: 3000 },
  );
  t.is(canonicalJson(JSON.parse('{"b":1,"10":2,"2":3,"__proto__":4,"a":"\ud800"}')), '{"10":2,"2":3,"__proto__":4,"a":"\\ud800","b":1}');
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
