// The keys of a person (profiles/person.ts): the user key is the user ID trimmed as
// JavaScript trims it, escaped for PostgreSQL; the lock keys of different kinds never meet; and
// the migration's SQL copy of the trim (intake_padded_user_key, for rows stored before the
// column) is the same rule for every UTF-16 code unit, checked against the real PostgreSQL.
import { createHash } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { toPgText } from '../../platform/pg-text.ts';
import {
  consentLock,
  emailLock,
  environmentLock,
  journeyLock,
  paddedUserKey,
  sortedLocks,
  userHashOf,
  userHashOfKey,
  userKeyOf,
  userLock,
} from '../../profiles/person.ts';
import { migrateOnce, TEST_DATABASE_URL } from '../helpers/services.ts';

test('the user key is the trimmed ID in its stored form; its hash keys the same person whatever the padding', (t) => {
  t.is(userKeyOf('  u-7 \t'), 'u-7');
  t.is(userKeyOf(' a\0b '), toPgText('a\0b'));
  t.deepEqual(userHashOf('\u00a0u-7\n'), userHashOfKey('u-7'));
  t.notDeepEqual(userHashOf('u-7'), userHashOf('U-7'));
});

test('an event keeps its userId as sent; the padded key is the trimmed one, null when nothing was trimmed', (t) => {
  t.is(paddedUserKey(' u-7 '), 'u-7');
  t.is(paddedUserKey('\u3000u-7\u2028'), 'u-7');
  t.is(paddedUserKey('u-7'), null);
  t.is(paddedUserKey(null), null);
  // Whitespace inside the ID is part of it.
  t.is(paddedUserKey('u 7'), null);
});

test('lock keys of one person differ by kind, environment and value; sortedLocks orders and dedupes', (t) => {
  const env = '00000000-0000-0000-0000-000000000001';
  const other = '00000000-0000-0000-0000-000000000002';
  const keys = [environmentLock(env), userLock(env, 'u'), emailLock(env, 'u'), journeyLock(env, 'u'), consentLock(env, 'email', 'marketing', 'u')];
  t.is(new Set(keys).size, keys.length);
  // The first 64 bits of the SHA-256, signed: gateways of two releases take the same locks.
  t.is(userLock(env, 'u'), createHash('sha256').update(`user:${env}:u`).digest().readBigInt64BE(0));
  t.is(environmentLock(env), 2940554898782709996n);
  t.not(userLock(env, 'u'), userLock(other, 'u'));
  t.not(consentLock(env, 'email', 'marketing', 'u'), consentLock(env, 'email', 'tracking', 'u'));
  const sorted = sortedLocks([...keys, keys[0]]);
  t.is(sorted.length, keys.length);
  for (let i = 1; i < sorted.length; i++) t.true(sorted[i - 1] < sorted[i]);
});

test("the migration's intake_padded_user_key trims exactly what JavaScript's trim does, for every UTF-16 code unit", async (t) => {
  await migrateOnce();
  const client = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await client.connect();
  t.teardown(() => client.end());
  // Every code unit PostgreSQL's UTF-8 text can hold (no NUL, no lone surrogate), around an ID.
  const units: string[] = [];
  for (let c = 1; c <= 0xffff; c++) if (c < 0xd800 || c > 0xdfff) units.push(String.fromCharCode(c));
  const ids = units.flatMap((u) => [`${u}id`, `id${u}`, `${u}${u}i d${u}`]);
  const { rows } = await client.query<{ k: string | null }>(
    'SELECT intake_padded_user_key(u) AS k FROM unnest($1::text[]) WITH ORDINALITY AS x(u, n) ORDER BY n',
    [ids],
  );
  const differ = ids.filter((id, i) => rows[i].k !== paddedUserKey(id));
  t.deepEqual(
    differ.map((id) => [...id].map((c) => c.charCodeAt(0).toString(16))),
    [],
  );
});
