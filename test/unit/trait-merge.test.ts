import test from 'ava';
import { joinTraits, mergeTraits, type TraitState } from '../../identify/trait-merge.ts';

const state = (fields: Record<string, unknown>, times: Record<string, number>, updatedAt: number): TraitState => ({ fields, times, updatedAt });

test('a new profile takes every trait at the call time', (t) => {
  const r = mergeTraits(null, { name: 'Ann', plan: null }, 100);
  t.deepEqual(r.fields, { name: 'Ann', plan: null });
  t.deepEqual(r.times, { name: 100, plan: 100 });
  t.is(r.updatedAt, 100);
  t.deepEqual(r.changed, ['name', 'plan']);
});

test('only the traits sent are written; others are unchanged', (t) => {
  const r = mergeTraits(state({ name: 'Ann', city: 'Oslo' }, { name: 1, city: 1 }, 1), { name: 'Bo' }, 5);
  t.deepEqual(r.fields, { name: 'Bo', city: 'Oslo' });
  t.deepEqual(r.times, { name: 5, city: 1 });
});

test('null is stored as null and the key stays', (t) => {
  const r = mergeTraits(state({ name: 'Ann' }, { name: 1 }, 1), { name: null }, 2);
  t.true(Object.hasOwn(r.fields, 'name'));
  t.is(r.fields.name, null);
  t.deepEqual(r.changed, ['name']);
});

test('nested values replace the whole stored value', (t) => {
  const r = mergeTraits(
    state({ address: { city: 'Oslo', zip: '0150' }, tags: [1, 2] }, { address: 1, tags: 1 }, 1),
    { address: { city: 'Bergen' }, tags: [3] },
    2,
  );
  t.deepEqual(r.fields.address, { city: 'Bergen' });
  t.deepEqual(r.fields.tags, [3]);
});

test('an older call skips older traits but applies its newer ones', (t) => {
  const r = mergeTraits(state({ name: 'New', plan: 'pro' }, { name: 50, plan: 10 }, 50), { name: 'Old', plan: 'team', city: 'Rome' }, 20);
  t.deepEqual(r.fields, { name: 'New', plan: 'team', city: 'Rome' });
  t.deepEqual(r.written, ['plan', 'city']);
  t.is(r.updatedAt, 50, 'updated_at never moves back');
});

test('equal times: the later arrival wins', (t) => {
  const r = mergeTraits(state({ name: 'First' }, { name: 30 }, 30), { name: 'Second' }, 30);
  t.is(r.fields.name, 'Second');
});

test('writing the same value is written but not a change', (t) => {
  const r = mergeTraits(state({ prefs: { a: 1, b: [1, 2] } }, { prefs: 1 }, 1), { prefs: { b: [1, 2], a: 1 } }, 2);
  t.deepEqual(r.written, ['prefs']);
  t.deepEqual(r.changed, []);
});

test('a call where every trait is older changes nothing', (t) => {
  const r = mergeTraits(state({ a: 1 }, { a: 10 }, 10), { a: 2 }, 5);
  t.deepEqual(r.written, []);
  t.deepEqual(r.fields, { a: 1 });
  t.is(r.updatedAt, 10);
});

test('a trait named __proto__ is data, not a prototype', (t) => {
  const traits = JSON.parse('{"__proto__": {"polluted": true}}');
  const r = mergeTraits(null, traits, 1);
  t.true(Object.hasOwn(r.fields, '__proto__'));
  t.is(Object.getPrototypeOf(r.fields), Object.prototype);
  t.is(JSON.stringify(r.fields), '{"__proto__":{"polluted":true}}');
  t.is(({} as Record<string, unknown>).polluted, undefined);
});

test('null to a value and a value to null are changes; null to null is not', (t) => {
  t.deepEqual(mergeTraits(state({ a: null }, { a: 1 }, 1), { a: 0 }, 2).changed, ['a']);
  t.deepEqual(mergeTraits(state({ a: null }, { a: 1 }, 1), { a: null }, 2).changed, []);
});

test('joinTraits applies each trait of the joining profile at its own time, as one call per trait would', (t) => {
  const into = state({ name: 'Ann', city: 'Oslo', plan: 'pro' }, { name: 10, city: 30, plan: 5 }, 30);
  const from = state({ name: 'Bo', city: 'Rome', age: 40 }, { name: 20, city: 25, age: 1 }, 26);
  let expected = into as TraitState;
  for (const key of Object.keys(from.fields)) expected = mergeTraits(expected, { [key]: from.fields[key] }, from.times[key]);
  const joined = joinTraits(into, from);
  t.deepEqual(joined.fields, expected.fields);
  t.deepEqual(joined.times, expected.times);
  t.deepEqual(joined.fields, { name: 'Bo', city: 'Oslo', plan: 'pro', age: 40 });
  t.is(joined.updatedAt, 30);
});

// One mergeTraits call per trait copied the profile per trait: 200,000 traits took hours.
test('joinTraits is linear: 200,000 traits join in seconds', (t) => {
  const fields: Record<string, unknown> = {};
  const times: Record<string, number> = {};
  for (let i = 0; i < 200_000; i++) ((fields[`k${i}`] = i), (times[`k${i}`] = 1));
  const started = performance.now();
  const joined = joinTraits(state({}, {}, 0), state(fields, times, 1));
  t.is(Object.keys(joined.fields).length, 200_000);
  t.true(performance.now() - started < 5000);
});
