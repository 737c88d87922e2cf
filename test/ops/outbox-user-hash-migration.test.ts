// Outbox rows written before outbox_events.user_hash (20261206003000_outbox_user_hash) get the
// hash an erasure removes them by: a database at the schema before it, holding rows whose
// userIds are padded, escaped, multi-byte or hold what JSON escapes, is migrated, and each row's
// hash is the one Identify writes for the same userId now (profiles/person.ts userHashOf).
import test from 'ava';
import { stringifyJson } from '../../platform/json-text.ts';
import { userHashOf } from '../../profiles/person.ts';
import { databaseBefore } from '../helpers/migration-db.ts';

const MIGRATION = '20261206003000_outbox_user_hash';
const ENV = '00000000-0000-0000-0000-000000000001';

test('outbox rows written before the column get the hash of their userId as Identify writes it now', async (t) => {
  const { pool, applyRest } = await databaseBefore(t, MIGRATION, 'outboxmig');
  const userIds = [
    'u-1',
    ' u-7 ',
    '\u00a0\ufeffpadded\u3000\t',
    'back\\slash',
    'quote"d/slash',
    'nul-\0-in',
    'ctrl-\b\f\n\r\t\u0001\u001f\u007f',
    'Zoë 漢字 😀',
    'lone-\ud800-high',
    'lone-\udc00-low',
    '\\u0000 written out',
    '\\\0',
  ];
  const payloads = [
    ...userIds.map((userId, i) =>
      stringifyJson({ userId, profileId: '00000000-0000-0000-0000-00000000000a', messageId: `m-${i}`, at: 1, changed: { userId: 'other' } }),
    ),
    ...userIds.map((userId, i) =>
      stringifyJson({
        userId,
        profileId: '00000000-0000-0000-0000-00000000000a',
        messageId: `s-${i}`,
        channel: 'email',
        purpose: 'marketing',
        address: 'a@b.c',
        status: 'subscribed',
        decidedAt: 1,
        expiresAt: null,
      }),
    ),
  ];
  for (const payload of payloads) {
    await pool.query(`INSERT INTO outbox_events (environment_id, kind, payload) VALUES ($1, 'profile_fields_changed', $2)`, [ENV, payload]);
  }
  await pool.query(`INSERT INTO outbox_events (environment_id, kind, payload) VALUES ($1, 'k', '{}')`, [ENV]);

  await applyRest();

  const { rows } = await pool.query<{ user_hash: Buffer | null }>('SELECT user_hash FROM outbox_events ORDER BY id');
  t.deepEqual(
    rows.map((r) => r.user_hash?.toString('hex') ?? null),
    [...[...userIds, ...userIds].map((u) => userHashOf(u).toString('hex')), null],
  );
  const { rows: fn } = await pool.query(`SELECT 1 FROM pg_proc WHERE proname = 'intake_outbox_user_key'`);
  t.is(fn.length, 0, 'the backfill leaves no function behind');
});
