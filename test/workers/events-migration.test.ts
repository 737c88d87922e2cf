// The migration of an unpartitioned events table (20261127100000_events_partitioned) on a
// populated database: the table is renamed in an instant, new events are stored meanwhile, and
// the maintenance moves every old row into the partitions, in batches that can stop anywhere,
// with no event lost or doubled.
import test from 'ava';
import pg from 'pg';
import { createDb } from '../../platform/db.ts';
import { hasLegacyEvents, moveLegacyEvents } from '../../events/storage.ts';
import { persistEvent } from '../../workers/persist-event.ts';
import { databaseBefore } from '../helpers/migration-db.ts';

const ENV = '6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0001';
const ROWS = 12_345;

test('a populated unpartitioned events table converts: every event there once, ids and journey marks kept', async (t) => {
  const mdb = await databaseBefore(t, '20261127100000_events_partitioned', 'evmig');
  const { pool } = mdb;
  await pool.query(`INSERT INTO organizations (id, slug) VALUES ('6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0000', 'mig')`);
  await pool.query(
    `INSERT INTO environments (id, organization_id, path_value, environment_key, is_production)
                    VALUES ($1, '6f1c1b53-5d8e-4d7a-9a55-1f4d8d6c0000', 'mig', 'prod', true)`,
    [ENV],
  );
  // Five days of events, as the unpartitioned table holds them (the last one marked by the journey engine).
  await pool.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys, journeys_at, journey_user)
     SELECT $1, 'm-' || g, sha256(convert_to('m-' || g, 'UTF8')), 'Order Completed', 'u-' || (g % 100), now(),
            now() - (g % 5) * interval '1 day' - interval '1 hour', '{"n":' || g || '}', 'processed', true, true,
            CASE WHEN g = ${ROWS} THEN now() END, CASE WHEN g = ${ROWS} THEN 'u-45' END
     FROM generate_series(1, ${ROWS}) g`,
    [ENV],
  );
  const before = await pool.query<{ id: string; m: string }>(
    `SELECT id::text, message_id AS m FROM events WHERE message_id IN ('m-1', 'm-${ROWS}') ORDER BY message_id`,
  );

  await mdb.applyRest();
  t.true(await hasLegacyEvents(pool));

  const url = (pool as unknown as { options: { connectionString: string } }).options.connectionString;
  const db = createDb({ databaseUrl: url, databasePoolSize: 2 });
  t.teardown(() => db.$disconnect());
  // Track goes on meanwhile: a new event, and an old messageId sent again before its row moved.
  const again = (messageId: string) => `{"type":"track","messageId":"${messageId}","event":"Order Completed","userId":"u-again","anonymousId":null}`;
  const queued = (messageId: string) => ({ environmentId: ENV, messageId, receivedAt: Date.now(), timestampMs: Date.now(), payload: again(messageId) });
  t.true(await persistEvent(db, queued('new-1')));
  t.true(await persistEvent(db, queued('m-7')));

  // Moved a batch at a time, as a worker cut short would leave it, then to the end.
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  t.teardown(() => client.end());
  const first = await moveLegacyEvents(pool, client, { now: Date.now(), retentionDays: null, until: 0 });
  t.false(first.done);
  t.true(first.moved > 0 && first.moved < ROWS);
  // Run again as from the start of a new round: its progress is kept, nothing moves twice.
  let moved = first.moved;
  for (let done = false; !done;) {
    const next = await moveLegacyEvents(pool, client, { now: Date.now(), retentionDays: null, until: 0 });
    moved += next.moved;
    done = next.done;
  }
  t.is(moved, ROWS - 1, 'every legacy row moved except the one sent again meanwhile');
  t.false(await hasLegacyEvents(pool));
  const counts = await pool.query<{ n: number; distinct: number; ids: number }>(
    `SELECT count(*)::int AS n, count(DISTINCT message_id)::int AS distinct, (SELECT count(*)::int FROM event_ids) AS ids FROM events`,
  );
  t.deepEqual(counts.rows[0], { n: ROWS + 1, distinct: ROWS + 1, ids: ROWS + 1 });
  const after = await pool.query<{ id: string; m: string; journey_user: string | null }>(
    `SELECT id::text, message_id AS m, journey_user FROM events WHERE message_id IN ('m-1', 'm-${ROWS}') ORDER BY message_id`,
  );
  t.deepEqual(
    after.rows.map((r) => ({ id: r.id, m: r.m })),
    before.rows,
  );
  t.deepEqual(
    after.rows.map((r) => r.journey_user),
    [null, 'u-45'],
  );
  const resent = await pool.query<{ payload: string }>(`SELECT payload FROM events WHERE message_id = 'm-7'`);
  t.deepEqual(resent.rows, [{ payload: again('m-7') }]);
  // Each row sits in the partition of its own day.
  const misplaced = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM events WHERE tableoid::regclass::text <> 'events_p' || to_char(received_at AT TIME ZONE 'UTC', 'YYYYMMDD')`,
  );
  t.is(misplaced.rows[0].n, 0);
});

test('an empty events table is simply replaced', async (t) => {
  const mdb = await databaseBefore(t, '20261127100000_events_partitioned', 'evempty');
  await mdb.applyRest();
  t.false(await hasLegacyEvents(mdb.pool));
});
