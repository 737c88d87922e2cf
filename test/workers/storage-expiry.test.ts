// What the storage maintenance removes besides partitions, against the real PostgreSQL: relayed
// outbox rows after an hour (never one waiting for the relay), Identify's records past the window
// with the pre-digest parts of those that have them, and nothing of consent. A database of the
// file's own: the removal is global to a database, and serial tests, since a whole round of one
// test would remove what another test counts on removing itself.
import { randomUUID } from 'node:crypto';
import test from 'ava';
import pg from 'pg';
import { removeRelayedOutbox } from '../../events/storage.ts';
import { maintenanceRound } from '../../workers/storage-maintenance.ts';
import { ownDatabase } from '../helpers/services.ts';

let pool: pg.Pool;
test.before(async () => {
  pool = new pg.Pool({ connectionString: await ownDatabase('expiry'), max: 2 });
});
test.after.always(() => pool?.end());

test.serial('relayed outbox rows go an hour after their relay; unrelayed ones stay whatever their age', async (t) => {
  const env = randomUUID();
  const insert = (relayed: string | null, created = "now() - interval '3 hours'") =>
    pool.query<{ id: string }>(
      `INSERT INTO outbox_events (environment_id, kind, payload, created_at, relayed_at) VALUES ($1, 'k', '{}', ${created}, ${relayed ?? 'NULL'}) RETURNING id::text`,
      [env],
    );
  const old = (await insert("now() - interval '2 hours'")).rows[0].id;
  const recent = (await insert("now() - interval '10 minutes'")).rows[0].id;
  const waiting = (await insert(null)).rows[0].id;
  let removed = 0;
  for (let n = -1; n !== 0; removed += n) n = await removeRelayedOutbox(pool, Date.now());
  t.true(removed >= 1);
  const left = await pool.query<{ id: string }>(`SELECT id::text FROM outbox_events WHERE environment_id = $1 ORDER BY id`, [env]);
  t.deepEqual(
    left.rows.map((r) => r.id),
    [recent, waiting],
  );
  t.false(left.rows.some((r) => r.id === old));
});

test.serial("Identify's records past the window go, with their pre-digest parts; newer ones and consent decisions stay", async (t) => {
  const env = randomUUID();
  const [oldKey, legacyKey, newKey] = [randomUUID(), randomUUID(), randomUUID()];
  await pool.query(
    `INSERT INTO identify_messages (environment_id, message_key, call_digest, created_at) VALUES
       ($1, $2, 1, now() - interval '8 days'), ($1, $3, NULL, now() - interval '30 days'), ($1, $4, 2, now() - interval '6 days')`,
    [env, oldKey, legacyKey, newKey],
  );
  await pool.query(`INSERT INTO identify_messages_legacy (environment_id, message_key, user_id, traits) VALUES ($1, $2, 'u', '{}')`, [env, legacyKey]);
  await pool.query(
    `INSERT INTO consent_decisions (environment_id, channel, purpose, address, address_hash, status, source, decided_at, updated_at)
     VALUES ($1, 'email', 'marketing', 'a@example.com', '\\x00', 'granted', 'test', 0, now() - interval '10 years')`,
    [env],
  );
  // A whole maintenance round, as a worker runs it.
  const round = await maintenanceRound(pool, {
    eventsRetentionDays: 30,
    eventPartitionsAheadDays: 3,
    identifyIdempotencyDays: 7,
    addressHistoryDays: null,
    storageMaintenanceMs: 60_000,
  });
  t.true(round.ran);
  t.true(round.identifyMessagesRemoved >= 2);
  const left = await pool.query<{ k: string }>(`SELECT message_key::text AS k FROM identify_messages WHERE environment_id = $1`, [env]);
  t.deepEqual(
    left.rows.map((r) => r.k),
    [newKey],
  );
  t.is((await pool.query(`SELECT 1 FROM identify_messages_legacy WHERE environment_id = $1`, [env])).rowCount, 0);
  t.is((await pool.query(`SELECT 1 FROM consent_decisions WHERE environment_id = $1`, [env])).rowCount, 1);
});

test.serial('a worker shutting down ends the round at its next step: expired records wait for the next round', async (t) => {
  const env = randomUUID();
  await pool.query(`INSERT INTO identify_messages (environment_id, message_key, call_digest, created_at) VALUES ($1, $2, 1, now() - interval '8 days')`, [
    env,
    randomUUID(),
  ]);
  const settings = { eventsRetentionDays: 30, eventPartitionsAheadDays: 3, identifyIdempotencyDays: 7, addressHistoryDays: null, storageMaintenanceMs: 60_000 };
  const round = await maintenanceRound(pool, settings, Date.now(), () => true);
  t.true(round.ran);
  t.false(round.more, 'no round again at once while stopping');
  t.is((await pool.query(`SELECT 1 FROM identify_messages WHERE environment_id = $1`, [env])).rowCount, 1);
  t.true((await maintenanceRound(pool, settings)).identifyMessagesRemoved >= 1, 'the next round removes it');
});
