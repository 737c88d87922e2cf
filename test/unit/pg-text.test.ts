import test from 'ava';
import { fromPgText, isPlainText, toPgText } from '../../platform/pg-text.ts';

test('the escape is injective and reversible, and leaves ordinary text alone', (t) => {
  const samples = ['plain', 'a\\b', '\\0', 'x\0y', '\ud800', 'a\udfffb', '😀', '\\ud800', 'q😀\ud800', '\0\\\ud83d'];
  const escaped = samples.map(toPgText);
  t.is(new Set(escaped).size, samples.length);
  for (const [i, s] of samples.entries()) t.is(fromPgText(escaped[i]), s, JSON.stringify(s));
  t.is(toPgText('plain 😀'), 'plain 😀');
  t.false(escaped.some((e) => e.includes('\0') || /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(e)));
});

test('isPlainText: text PostgreSQL stores unchanged', (t) => {
  t.true(isPlainText('a\\b 😀'));
  t.false(isPlainText('a\0'));
  t.false(isPlainText('\udc00'));
});
