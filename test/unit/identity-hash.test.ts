import test from 'ava';
import { createHash, randomBytes } from 'node:crypto';
import { hashStored, identityHash } from '../../platform/identity-hash.ts';
import { toPgText } from '../../platform/pg-text.ts';

test('a fixed 32-byte key, whatever the length of the value', (t) => {
  for (const length of [0, 1, 2_704, 3_000, 100_000, 1_000_000]) t.is(identityHash('x'.repeat(length)).length, 32);
});

test('equal values share a key; different values do not (also when only their ends differ)', (t) => {
  const long = randomBytes(50_000).toString('base64');
  t.deepEqual(identityHash(long), identityHash(`${long}`));
  t.notDeepEqual(identityHash(long), identityHash(`${long}a`));
  t.notDeepEqual(identityHash(`a${long}`), identityHash(`b${long}`));
  t.notDeepEqual(identityHash('user'), identityHash('user '));
});

test('the key is the SHA-256 of the stored (escaped) UTF-8 text, as the migration computed it for existing rows', (t) => {
  for (const value of ['plain', 'x\0y', 'a\ud800b', '😀 ünïcode', 'back\\slash']) {
    const stored = toPgText(value);
    t.deepEqual(identityHash(value), createHash('sha256').update(Buffer.from(stored, 'utf8')).digest());
    t.deepEqual(hashStored(stored), identityHash(value));
  }
  // NUL and a lone surrogate are escaped first, so they do not collide with U+FFFD or with each other.
  t.notDeepEqual(identityHash('\ud800'), identityHash('\ufffd'));
  t.notDeepEqual(identityHash('\0'), identityHash('\\0'));
});
