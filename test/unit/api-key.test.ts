import test from 'ava';
import { extractApiKey, generateApiKey, hashApiKey, KEY_PREFIX, keySuffix } from '../../environments/api-key.ts';

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');

test('generateApiKey: prefix and 40 base62 characters', (t) => {
  t.is(KEY_PREFIX, 'itk_');
  for (let i = 0; i < 100; i++) t.regex(generateApiKey(), /^itk_[0-9A-Za-z]{40}$/);
});

test('generateApiKey: keys differ', (t) => {
  const keys = new Set(Array.from({ length: 1000 }, generateApiKey));
  t.is(keys.size, 1000);
});

test('generateApiKey: characters are uniform (no modulo bias)', (t) => {
  const counts = new Map<string, number>();
  const keys = 5000;
  for (let i = 0; i < keys; i++) {
    for (const c of generateApiKey().slice(KEY_PREFIX.length)) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  t.is(counts.size, 62);
  // Expected 3226 per char (sd ~56); plain `byte % 62` would give ~3900 to 8 of them.
  const expected = (keys * 40) / 62;
  for (const [c, n] of counts) t.true(Math.abs(n - expected) < 400, `${c}: ${n}`);
});

test('hashApiKey: sha256 hex', (t) => {
  t.is(hashApiKey('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  t.regex(hashApiKey(generateApiKey()), /^[0-9a-f]{64}$/);
});

test('keySuffix: last five characters', (t) => {
  t.is(keySuffix('itk_abcdefGHIJK'), 'GHIJK');
  t.is(keySuffix('abc'), 'abc');
});

const extracts = test.macro({
  exec(t, headers: Parameters<typeof extractApiKey>[0], expected: string | null) {
    t.is(extractApiKey(headers), expected);
  },
  title: (provided = '', _h: unknown, expected: string | null) => `${provided} -> ${JSON.stringify(expected)}`,
});

test('X-Api-Key', extracts, { 'x-api-key': 'itk_a' }, 'itk_a');
test('X-Api-Key trimmed', extracts, { 'x-api-key': '  itk_a\t' }, 'itk_a');
test('X-Api-Key wins over a valid Bearer', extracts, { 'x-api-key': 'itk_wrong', authorization: 'Bearer itk_right' }, 'itk_wrong');
test('X-Api-Key wins over Basic', extracts, { 'x-api-key': 'itk_a', authorization: `Basic ${b64('itk_b:')}` }, 'itk_a');
test('blank X-Api-Key falls back to Bearer', extracts, { 'x-api-key': '   ', authorization: 'Bearer itk_b' }, 'itk_b');
test('empty X-Api-Key falls back to Basic', extracts, { 'x-api-key': '', authorization: `Basic ${b64('itk_b:')}` }, 'itk_b');
test('blank X-Api-Key and no Authorization', extracts, { 'x-api-key': ' ' }, null);
test('repeated X-Api-Key is not a valid key', extracts, { 'x-api-key': ['itk_a', 'itk_b'] }, 'itk_a, itk_b');
test('no headers', extracts, {}, null);

test('Bearer', extracts, { authorization: 'Bearer itk_a' }, 'itk_a');
test('bearer lowercase', extracts, { authorization: 'bearer itk_a' }, 'itk_a');
test('BEARER uppercase', extracts, { authorization: 'BEARER itk_a' }, 'itk_a');
test('Bearer extra spaces', extracts, { authorization: '  Bearer    itk_a  ' }, 'itk_a');
test('Bearer with no token', extracts, { authorization: 'Bearer' }, null);
test('Bearer with blank token', extracts, { authorization: 'Bearer    ' }, null);
test('Bearer glued to token', extracts, { authorization: 'Beareritk_a' }, null);

test('Basic key:', extracts, { authorization: `Basic ${b64('itk_a:')}` }, 'itk_a');
test('basic lowercase', extracts, { authorization: `basic ${b64('itk_a:')}` }, 'itk_a');
test('Basic password ignored', extracts, { authorization: `Basic ${b64('itk_a:secret:more')}` }, 'itk_a');
test('Basic without colon', extracts, { authorization: `Basic ${b64('itk_a')}` }, 'itk_a');
test('Basic empty username', extracts, { authorization: `Basic ${b64(':itk_a')}` }, null);
test('Basic empty decoded', extracts, { authorization: `Basic ${b64('')}` }, null);
test('Basic no token', extracts, { authorization: 'Basic ' }, null);
test('Basic not base64: a credential all the same (invalid, not missing)', extracts, { authorization: 'Basic !!!' }, '!!!');
test('Basic non-ASCII username', extracts, { authorization: `Basic ${b64('clé:')}` }, 'clé');

test('unknown scheme', extracts, { authorization: 'Token itk_a' }, null);
test('bare key in Authorization', extracts, { authorization: 'itk_a' }, null);
test('empty Authorization', extracts, { authorization: '' }, null);
