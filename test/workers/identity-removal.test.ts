// Retention's removal of a dropped day's messageId identities (events/storage.ts
// dropEventPartition) against the real PostgreSQL: it probes event_ids by its primary key, one
// identity at a time, whatever the planner knows of the table. event_ids grows with every event
// kept, a batch of the removal does not: a sequential scan of the table per batch of 5,000 is
// what a planner without statistics picked (autovacuum off, or a bulk load not yet analyzed),
// and at millions of identities it made one day's removal take an hour.
// A database of the file's own: its statistics counters see only this file's statements.
import test from 'ava';
import pg from 'pg';
import { randomUUID } from 'node:crypto';
import { DAY_MS, partitionName } from '../../events/partition-plan.ts';
import { createPartitionsFor, dropEventPartition, eventPartitions, MAINTENANCE_BATCH } from '../../events/storage.ts';
import { ownDatabase } from '../helpers/services.ts';

let pool: pg.Pool;

test.before(async () => {
  pool = new pg.Pool({ connectionString: await ownDatabase('idrm'), max: 3 });
  // As on a server whose autovacuum has not analyzed the table (this machine's is off).
  await pool.query('ALTER TABLE event_ids SET (autovacuum_enabled = false)');
  await pool.query('TRUNCATE event_ids');
});

test.after.always(async () => {
  await pool?.end();
});

interface ScanCounts {
  seq: number;
  idx: number;
}

/**
 * event_ids' scans so far by `clients` (the pool's partitions are made before they are counted). Each reports its counters
 * now (a backend does at most once a second by itself, so a late report would land inside the
 * span measured).
 */
async function scansOfEventIds(clients: pg.PoolClient[]): Promise<ScanCounts> {
  for (const client of clients) await client.query('SELECT pg_stat_force_next_flush()');
  for (const client of clients) await client.query('SELECT 1');
  const [reader] = clients;
  await reader.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await reader.query<{ seq: string; idx: string }>(
    `SELECT seq_scan::text AS seq, coalesce(idx_scan, 0)::text AS idx FROM pg_stat_user_tables WHERE relname = 'event_ids'`,
  );
  return { seq: Number(rows[0].seq), idx: Number(rows[0].idx) };
}

/** An environment of a new organization, made in SQL (this file runs no gateway). */
async function newEnvironment(sql: pg.PoolClient): Promise<string> {
  const environmentId = randomUUID();
  const organizationId = randomUUID();
  await sql.query(`INSERT INTO organizations (id, slug) VALUES ($1, $2)`, [organizationId, `idrm-${organizationId}`]);
  await sql.query(`INSERT INTO environments (id, organization_id, path_value, environment_key, is_production) VALUES ($1, $2, $3, 'prod', true)`, [
    environmentId,
    organizationId,
    `idrm-${organizationId}`,
  ]);
  return environmentId;
}

test('a dropped day’s identities are removed through event_ids’ primary key, not a scan of the table', async (t) => {
  const clients = [await pool.connect(), await pool.connect()];
  const [reader, own] = clients;
  try {
    const environmentId = await newEnvironment(own);
    const day = Date.UTC(2034, 2, 3);
    await createPartitionsFor(pool, day, day + DAY_MS - 1);
    // More than one batch of the day's events, with their identities; and the identities of
    // events kept in other days, which stay.
    const dayEvents = MAINTENANCE_BATCH + 1000;
    await own.query(
      `WITH made AS (
         INSERT INTO events (environment_id, message_id, message_hash, event, "timestamp", received_at, payload, status, within_limits, drives_journeys)
         SELECT $1::uuid, 'm' || n, sha256(('m' || n)::bytea), 'Order Completed', $2::timestamptz, $2::timestamptz + n * interval '1 ms', '{}', 'processed', true, false
         FROM generate_series(1, $3::int) n
         RETURNING environment_id, message_hash, received_at)
       INSERT INTO event_ids SELECT * FROM made`,
      [environmentId, new Date(day), dayEvents],
    );
    const kept = 50_000;
    await own.query(`INSERT INTO event_ids SELECT $1::uuid, sha256(('kept' || n)::bytea), $2::timestamptz FROM generate_series(1, $3::int) n`, [
      environmentId,
      new Date(day + 5 * DAY_MS),
      kept,
    ]);
    const partition = (await eventPartitions(own)).find((p) => p.name === partitionName(day));
    t.truthy(partition);

    const before = await scansOfEventIds(clients);
    const timing = await dropEventPartition(own, partition!);
    const after = await scansOfEventIds(clients);
    t.is(timing.identitiesRemoved, dayEvents);
    t.is(after.seq - before.seq, 0, 'no sequential scan of event_ids');
    t.true(after.idx > before.idx, 'event_ids probed by its primary key');
    const { rows } = await reader.query<{ n: number }>('SELECT count(*)::int AS n FROM event_ids WHERE environment_id = $1', [environmentId]);
    t.is(rows[0].n, kept);
  } finally {
    for (const client of clients) client.release();
  }
});
