// node --import tsx bench/events-migration.mts — the migration of an unpartitioned events table
// (20261127100000_events_partitioned) measured on BENCH_MIGRATION_EVENTS (5,000,000) rows of
// the bench's shape: how long the migration's transaction holds its exclusive lock on events,
// then how long the workers' maintenance takes to move every row into the partitions, the
// longest of its batches, and the slowest insert of a concurrent writer meanwhile. In a database
// of its own (BENCH_MIGRATION_DATABASE_URL, default intake_bench_migration), dropped at the end.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { createDb } from '../platform/db.ts';
import { migrationsDir } from '../cli/migrate.ts';
import { daysToCreate } from '../events/partition-plan.ts';
import { insertEventsOnce } from '../events/event-store.ts';
import { createEventPartitions, moveLegacyEvents } from '../events/storage.ts';

const ROWS = Number(process.env.BENCH_MIGRATION_EVENTS ?? 5_000_000);
const URL_ = process.env.BENCH_MIGRATION_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench_migration';
const MIGRATION = '20261127100000_events_partitioned';
const ENV = '6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0001';
const PAYLOAD =
  '{"type":"track","messageId":"x","event":"Order Completed","userId":"user-1","anonymousId":null,"timestamp":"2026-01-01T10:00:00.000Z","properties":{"plan":"pro","price":49.5,"currency":"EUR","items":[{"sku":"A-100","qty":2},{"sku":"B-7","qty":1}],"campaign":"winter-sale","referrer":"https://example.com/landing?utm_source=newsletter"},"context":{},"integrations":{}}';

const admin = new pg.Client({ connectionString: Object.assign(new URL(URL_), { pathname: '/postgres' }).toString() });
await admin.connect();
const name = new URL(URL_).pathname.slice(1);
await admin.query(`DROP DATABASE IF EXISTS "${name}"`);
await admin.query(`CREATE DATABASE "${name}"`);
const pool = new pg.Pool({ connectionString: URL_, max: 4 });
const dirs = (await readdir(migrationsDir, { withFileTypes: true }))
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();
const sqlOf = (dir: string) => readFile(path.join(migrationsDir, dir, 'migration.sql'), 'utf8');
for (const dir of dirs.filter((d) => d < MIGRATION)) await pool.query(await sqlOf(dir));
await pool.query(`INSERT INTO organizations (id, slug) VALUES ('6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0000', 'mig')`);
await pool.query(
  `INSERT INTO environments (id, organization_id, path_value, environment_key, is_production) VALUES ($1, '6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0000', 'mig', 'prod', true)`,
  [ENV],
);

let started = performance.now();
const seconds = () => Math.round((performance.now() - started) / 100) / 10;
for (let from = 1; from <= ROWS; from += 500_000) {
  // Seven days of events, as the unpartitioned table held them.
  await pool.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
     SELECT $1, 'm-' || g, sha256(convert_to('m-' || g, 'UTF8')), 'Order Completed', 'user-' || (g % 10000), now(),
            now() - interval '7 days' + g * (interval '7 days' / $4::int), $2, 'processed', true, true
     FROM generate_series($3::int, $3::int + 499999) g WHERE g <= $4::int`,
    [ENV, PAYLOAD, from, ROWS],
  );
}
await pool.query('VACUUM ANALYZE events');
const size = (await pool.query<{ s: string }>(`SELECT pg_size_pretty(pg_total_relation_size('events')) AS s`)).rows[0].s;
console.error(`filled ${ROWS} events (${size}) in ${seconds()} s`);

// The migration as `intake migrate` applies it: one transaction, holding ACCESS EXCLUSIVE on events from its RENAME to its COMMIT.
started = performance.now();
await pool.query(await sqlOf(MIGRATION));
const lockMs = Math.round(performance.now() - started);
await createEventPartitions(pool, daysToCreate(new Set(), Date.now(), 3));
for (const dir of dirs.filter((d) => d > MIGRATION)) await pool.query(await sqlOf(dir));

// A writer storing a new event every 20 ms meanwhile, as a worker would.
const db = createDb({ databaseUrl: URL_, databasePoolSize: 2 });
let writing = true;
let slowest = 0;
let written = 0;
const writer = (async () => {
  while (writing) {
    const t0 = performance.now();
    const now = Date.now();
    await insertEventsOnce(db, [
      {
        environmentId: ENV,
        messageId: `live-${written}`,
        event: 'Order Completed',
        userId: 'u',
        anonymousId: null,
        timestampMs: now,
        receivedAt: now,
        payload: PAYLOAD,
        status: 'processed',
        withinLimits: true,
        limitReason: null,
        drivesJourneys: true,
        error: null,
      },
    ]);
    slowest = Math.max(slowest, performance.now() - t0);
    written++;
    await new Promise((r) => setTimeout(r, 20));
  }
})();

started = performance.now();
const client = await pool.connect();
let moved = 0;
let longestBatch = 0;
for (let done = false; !done;) {
  const t0 = performance.now();
  // One batch per call: the longest transaction the move holds.
  const round = await moveLegacyEvents(pool, client, { now: Date.now(), retentionDays: null, until: 0 });
  longestBatch = Math.max(longestBatch, performance.now() - t0);
  moved += round.moved;
  done = round.done;
}
const moveSeconds = seconds();
writing = false;
await writer;
client.release();
const counts = (
  await pool.query<{ n: number; distinct: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT message_id)::int AS distinct FROM events WHERE message_id LIKE 'm-%'`,
  )
).rows[0];
console.log(
  JSON.stringify({
    events: ROWS,
    tableSize: size,
    'migration transaction (exclusive lock on events) ms': lockMs,
    'move s': moveSeconds,
    'moved rows/s': Math.round(moved / moveSeconds),
    'longest move batch ms': Math.round(longestBatch),
    'concurrent inserts': written,
    'slowest concurrent insert ms': Math.round(slowest),
    'legacy events after the move (all, once)': counts,
  }),
);
await db.$disconnect();
await pool.end();
await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
await admin.end();
