// pgArrayLiteral sends what node-postgres would (its own prepareValue is the oracle), faster.
import { createRequire } from 'node:module';
import test from 'ava';
import fc from 'fast-check';
import { pgArrayLiteral } from '../../platform/pg-array.ts';

const { prepareValue } = createRequire(import.meta.url)('pg/lib/utils') as { prepareValue(v: unknown): unknown };

test('the literal node-postgres sends, for strings with quotes, backslashes, braces, commas, NULLs and numbers', (t) => {
  const cases: unknown[][] = [
    [],
    ['a', 'b c', '', 'x"y', 'back\\slash', '{braces}', 'a,b', 'NULL', null, undefined, 'é 😀', '\\"'],
    [1, -2.5, 1e21, 0, 12n, true, false, null],
    ['{"name":"User 1","visits":3}', '[1,2]'],
    ['tab\there', 'new\nline', 'nul\u0000', 'del\u007f', 'lone \ud800', 'pair 😀 \\ "q"', '\u2028\u2029', '{"a":"\\n\\u0000"}'],
  ];
  for (const values of cases) t.is(pgArrayLiteral(values), prepareValue(values) as string);
  fc.assert(fc.property(fc.array(fc.oneof(fc.string(), fc.constant(null), fc.integer())), (values) => pgArrayLiteral(values) === prepareValue(values)));
  // Any UTF-16 text, control characters and lone surrogates included, and JSON texts of any value.
  fc.assert(fc.property(fc.array(fc.string({ unit: 'binary' })), (values) => pgArrayLiteral(values) === prepareValue(values)));
  fc.assert(fc.property(fc.array(fc.jsonValue().map((v) => JSON.stringify(v))), (values) => pgArrayLiteral(values) === prepareValue(values)));
});

test('an element kind node-postgres encodes itself is left to it', (t) => {
  t.is(pgArrayLiteral([Buffer.from('x')]), null);
  t.is(pgArrayLiteral([['nested']]), null);
  t.is(pgArrayLiteral([new Date(0)]), null);
});
