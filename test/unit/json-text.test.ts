import test from 'ava';
import { JsonText, nestsDeeperThan, stringifyJson, serializeIteratively } from '../../platform/json-text.ts';

const DEEP = 200_000;

const sameAsStringify = test.macro({
  exec(t, value: unknown) {
    const expected = JSON.stringify(value);
    t.is(serializeIteratively(value), expected);
    t.is(stringifyJson(value), expected);
  },
  title: (provided = '') => `iterative output equals JSON.stringify: ${provided}`,
});

class Point {
  x = 1;
  y = 2;
  toJSON(key: string) {
    return { point: `${this.x},${this.y}`, key };
  }
}

test('primitives', sameAsStringify, [null, true, false, 0, -0, 1.5, 1e21, 5e-7, NaN, Infinity, '', 'x']);
test('top-level string', sameAsStringify, 'a"b\\c\n');
test('top-level number', sameAsStringify, 42);
test('string escaping', sameAsStringify, { s: '"\\\b\f\n\r\t\u0000\u001f\u007f\u2028\ud800🙂é' });
test('key escaping', sameAsStringify, { 'a"b': 1, '\n': 2, 'é🙂': 3, '': 4 });
test('key order: integer-like keys first, then insertion order', sameAsStringify, { b: 1, 2: 2, a: 3, 1: 4, '-1': 5 });
test('empty containers', sameAsStringify, { a: {}, b: [], c: [[], {}], d: [{}] });
test('undefined, functions and symbols', sameAsStringify, {
  u: undefined,
  f: () => 1,
  s: Symbol('x'),
  arr: [undefined, () => 1, Symbol('y'), 1],
  keep: 1,
});
test('only skipped members', sameAsStringify, { u: undefined, f() {} });
test('first member skipped', sameAsStringify, { u: undefined, a: 1, v: undefined, b: 2 });
test('toJSON and Date', sameAsStringify, { p: new Point(), list: [new Point()], d: new Date(0) });
test('wrapper objects', sameAsStringify, { n: new Number(3), s: new String('x'), b: new Boolean(false) });
test('mixed nesting', sameAsStringify, { a: [1, { b: [2, { c: 'd' }] }], e: { f: { g: null } } });

test('top-level undefined throws instead of returning undefined', (t) => {
  t.throws(() => stringifyJson(undefined), { instanceOf: TypeError });
  t.throws(() => serializeIteratively(undefined), { instanceOf: TypeError });
});

test('cycles throw TypeError in the iterative serializer too', (t) => {
  const a: Record<string, unknown> = {};
  a.self = { back: a };
  t.throws(() => serializeIteratively(a), { instanceOf: TypeError });
  // A shared (non-cyclic) reference is fine.
  const shared = { x: 1 };
  t.is(serializeIteratively({ a: shared, b: shared }), '{"a":{"x":1},"b":{"x":1}}');
});

function nestedObjects(depth: number): unknown {
  let v: unknown = {};
  for (let i = 0; i < depth; i++) v = { a: v };
  return v;
}

function nestedArrays(depth: number): unknown {
  let v: unknown = [];
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

// Walks down the single chain of a nested value without recursion.
function chainDepth(value: unknown): number {
  let depth = 0;
  let v = value;
  for (;;) {
    if (Array.isArray(v)) v = v[0];
    else if (typeof v === 'object' && v !== null) v = (v as { a?: unknown }).a;
    else return depth;
    depth++;
  }
}

test('JSON.stringify alone cannot serialize 200,000 levels', (t) => {
  t.throws(() => JSON.stringify(nestedObjects(DEEP)), { instanceOf: RangeError });
});

test('200,000 levels of objects serialize and round-trip', (t) => {
  const text = stringifyJson(nestedObjects(DEEP));
  t.is(text, '{"a":'.repeat(DEEP) + '{}' + '}'.repeat(DEEP));
  const back = JSON.parse(text);
  t.is(chainDepth(back), DEEP + 1);
  t.is(stringifyJson(back), text);
});

test('200,000 levels of arrays serialize and round-trip', (t) => {
  const text = stringifyJson(nestedArrays(DEEP));
  t.is(text, '['.repeat(DEEP + 1) + ']'.repeat(DEEP + 1));
  const back = JSON.parse(text);
  t.is(chainDepth(back), DEEP + 1);
  t.is(stringifyJson(back), text);
});

test('200,000 levels of alternating objects and arrays with siblings', (t) => {
  let text = '"leaf\\"é"';
  for (let i = 0; i < DEEP; i++) text = i % 2 === 0 ? `[1,${text},{"k":null}]` : `{"x":true,"a":${text},"y":"z"}`;
  const parsed = JSON.parse(text);
  t.is(stringifyJson(parsed), text);
});

test('a deep branch next to ordinary members keeps member order and skips undefined', (t) => {
  const value = { first: 1, skip: undefined, deep: nestedArrays(DEEP), last: 'x' };
  const text = stringifyJson(value);
  t.true(text.startsWith('{"first":1,"deep":[[['));
  t.true(text.endsWith(']]],"last":"x"}'));
  t.is(text.length, '{"first":1,"deep":'.length + 2 * (DEEP + 1) + ',"last":"x"}'.length);
});

test('JsonText is written verbatim, at the top and inside values, on both paths', (t) => {
  const fields = new JsonText('{"a": [1, 2], "b":{"c":null}}');
  t.is(stringifyJson(fields), '{"a": [1, 2], "b":{"c":null}}');
  t.is(stringifyJson({ id: 'p', fields, n: 1 }), '{"id":"p","fields":{"a": [1, 2], "b":{"c":null}},"n":1}');
  t.is(stringifyJson([new JsonText('1'), null]), '[1,null]');
  t.is(stringifyJson({ deep: nestedArrays(DEEP), raw: new JsonText('"x"') }), `{"deep":${'['.repeat(DEEP + 1)}${']'.repeat(DEEP + 1)},"raw":"x"}`);
});

test('a value nested 2,000,000 levels deep serializes in linear time', (t) => {
  const depth = 2_000_000;
  const text = '['.repeat(depth) + ']'.repeat(depth);
  const value = JSON.parse(text);
  const started = performance.now();
  t.is(stringifyJson(value), text);
  // About 0.3–1 s on this project's VM; a Set of ancestors and a frame object per level took ~3 s.
  t.true(performance.now() - started < 5000);
});

test('nestsDeeperThan counts brackets outside strings only', (t) => {
  t.false(nestsDeeperThan('[[[]]]', 3));
  t.true(nestsDeeperThan('[[[[]]]]', 3));
  t.true(nestsDeeperThan('{"a":{"b":{"c":{}}}}', 3));
  t.false(nestsDeeperThan('{"a":"[[[[[[","b":["\\"[[[[["]}', 2));
  t.false(nestsDeeperThan('"\\\\"', 0));
  t.true(nestsDeeperThan(`{"d":${'['.repeat(8000)}${']'.repeat(8000)}}`, 1000));
});
