// What intake stores over time, and what removes it: the daily partitions of `events` (made
// ahead, dropped whole by retention), the messageId identities of event_ids that go with them,
// Identify's messageId records, address history no decision reads, relayed outbox rows, and
// the move of a pre-partitioning events table (events_legacy) into the partitions. The rules of
// time are events/partition-plan.ts and consent.ts (address history); this is their SQL. Everything takes a node-postgres client or pool (DETACH … CONCURRENTLY
// cannot run inside a transaction, and the maintenance holds its advisory lock on one connection).
import type pg from 'pg';
import { DAY_MS, daysBetween, partitionDay, partitionName, retentionBound } from './partition-plan.ts';

type Sql = Pick<pg.ClientBase, 'query'>;

/** Held while partitions of events are attached or detached (short: DDL only). */
const PARTITION_DDL_LOCK = 72_616_002;
/** Held by the one worker running the storage maintenance at a time. */
export const STORAGE_MAINTENANCE_LOCK = 72_616_003;

/** Rows one statement of the maintenance touches: each is a short transaction holding few row locks. */
export const MAINTENANCE_BATCH = 5000;

export interface EventPartition {
  name: string;
  /** The UTC day (epoch ms) it holds. */
  day: number;
  /** A DETACH … CONCURRENTLY that did not finish (it is finished on the next run). */
  detachPending: boolean;
}

/** The partitions attached to events, oldest first (only those named after their day: intake makes no other). */
export async function eventPartitions(sql: Sql): Promise<EventPartition[]> {
  const { rows } = await sql.query<{ name: string; pending: boolean }>(
    `SELECT c.relname AS name, i.inhdetachpending AS pending FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = 'public.events'::regclass`,
  );
  return rows
    .map((r) => ({ name: r.name, day: partitionDay(r.name), detachPending: r.pending }))
    .filter((p): p is EventPartition => p.day !== null)
    .sort((a, b) => a.day - b.day);
}

/**
 * Makes the partitions of `days` that do not exist, in one transaction under the DDL lock (two
 * workers at once: the second finds them made). Each is created as a table of its own and then
 * attached, which locks events only in SHARE UPDATE EXCLUSIVE mode: inserts go on meanwhile
 * (CREATE TABLE … PARTITION OF would take an exclusive lock on events). Returns the names made.
 */
export async function createEventPartitions(pool: pg.Pool, days: readonly number[]): Promise<string[]> {
  if (!days.length) return [];
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [PARTITION_DDL_LOCK]);
    const existing = new Set((await eventPartitions(client)).map((p) => p.day));
    const made: string[] = [];
    for (const day of days) {
      if (existing.has(day)) continue;
      const name = partitionName(day);
      const from = new Date(day).toISOString();
      const to = new Date(day + DAY_MS).toISOString();
      await client.query(`CREATE TABLE "${name}" (LIKE events INCLUDING DEFAULTS)`);
      await client.query(`ALTER TABLE events ATTACH PARTITION "${name}" FOR VALUES FROM ('${from}') TO ('${to}')`);
      existing.add(day);
      made.push(name);
    }
    await client.query('COMMIT');
    return made;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** Makes the partitions that the received times `fromMs` to `toMs` need (an insert found none). */
export function createPartitionsFor(pool: pg.Pool, fromMs: number, toMs: number): Promise<string[]> {
  return createEventPartitions(pool, daysBetween(fromMs, toMs));
}

export interface DropTiming {
  partition: string;
  /** Wall time of DETACH … CONCURRENTLY (SHARE UPDATE EXCLUSIVE on events: no insert waits on it). */
  detachMs: number;
  /** Wall time of the DROP of the detached table (ACCESS EXCLUSIVE on that table only, which no query reads any more). */
  dropMs: number;
  identitiesRemoved: number;
}

/**
 * Removes a partition whole: DETACH … CONCURRENTLY, then the event_ids rows of its events in
 * paced batches (a row claimed again since, by a newer event, has another received_at and stays),
 * then DROP TABLE. A run cut short leaves a detached table that the next run finishes.
 * `client` is a connection of its own: DETACH … CONCURRENTLY cannot run inside a transaction.
 */
export async function dropEventPartition(client: Sql, partition: EventPartition | string): Promise<DropTiming> {
  const name = typeof partition === 'string' ? partition : partition.name;
  let detachMs = 0;
  if (typeof partition !== 'string') {
    const started = performance.now();
    await client.query('SELECT pg_advisory_lock($1)', [PARTITION_DDL_LOCK]);
    try {
      await client.query(`ALTER TABLE events DETACH PARTITION "${name}" ${partition.detachPending ? 'FINALIZE' : 'CONCURRENTLY'}`);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [PARTITION_DDL_LOCK]);
    }
    detachMs = performance.now() - started;
  }
  let identitiesRemoved = 0;
  for (let after: string | null = '-1'; after !== null;) {
    const batchStarted = performance.now();
    const batch = await removeIdentitiesAfter(client, name, after);
    identitiesRemoved += batch.removed;
    after = batch.last;
    // As long a pause as the batch took: the removal takes at most half of one PostgreSQL core
    // from the inserts and reads going on meanwhile.
    if (after !== null) await new Promise((r) => setTimeout(r, performance.now() - batchStarted));
  }
  const started = performance.now();
  await client.query(`DROP TABLE "${name}"`);
  return { partition: name, detachMs, dropMs: performance.now() - started, identitiesRemoved };
}

/**
 * One batch of a detached day's identities: the next MAINTENANCE_BATCH events after id `after`.
 * A batch is bounded and event_ids is not, so each identity is a probe of its primary key.
 * Hash and merge joins are off for the statement because a planner without statistics of
 * event_ids (autovacuum off, or a bulk load not yet analyzed) picked a hash join over a
 * sequential scan of the whole table: seconds a batch at millions of identities.
 */
async function removeIdentitiesAfter(client: Sql, partition: string, after: string): Promise<{ last: string | null; removed: number }> {
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off');
    const { rows } = await client.query<{ last: string | null; removed: number }>(
      `WITH part AS (SELECT id, environment_id, message_hash, received_at FROM "${partition}" WHERE id > $1::bigint ORDER BY id LIMIT ${MAINTENANCE_BATCH}),
            removed AS (DELETE FROM event_ids i USING part
                        WHERE i.environment_id = part.environment_id AND i.message_hash = part.message_hash AND i.received_at = part.received_at
                        RETURNING 1)
       SELECT (SELECT max(id) FROM part)::text AS last, (SELECT count(*) FROM removed)::int AS removed`,
      [after],
    );
    await client.query('COMMIT');
    return rows[0];
  } catch (error) {
    // The batch's own error is the one to report, even when the connection is gone too.
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

/** Identify's messageId records older than `days` (with their pre-digest parts), one batch; returns how many. */
export async function removeIdentifyMessages(sql: Sql, now: number, days: number): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `WITH old AS (SELECT environment_id, message_key FROM identify_messages WHERE created_at < $1 LIMIT ${MAINTENANCE_BATCH}),
          gone AS (DELETE FROM identify_messages m USING old WHERE m.environment_id = old.environment_id AND m.message_key = old.message_key
                   RETURNING m.environment_id, m.message_key, m.call_digest),
          legacy AS (DELETE FROM identify_messages_legacy l USING gone
                     WHERE gone.call_digest IS NULL AND l.environment_id = gone.environment_id AND l.message_key = gone.message_key)
     SELECT count(*)::int AS n FROM gone`,
    [new Date(now - days * DAY_MS)],
  );
  return rows[0].n;
}

/** A place in address_claims' index order (profile_id, channel, at, id): where a removal pass stopped. */
export interface ClaimsCursor {
  profileId: string;
  channel: string;
  at: string;
  id: string;
}

/** Before every row: no profile id is below the nil UUID, no channel is empty. */
const FIRST_CLAIM: ClaimsCursor = { profileId: '00000000-0000-0000-0000-000000000000', channel: '', at: '-9223372036854775808', id: '-9223372036854775808' };

/**
 * One batch of the address-history removal, history-retention.ts removableClaims in SQL: the next rows
 * after `after` in the index's order, of which each at or before `horizon` goes when a later
 * claim of its profile and channel (by at, then id) is at or before it too. Returns how many
 * went and where the next batch starts (null: the pass reached the end).
 */
export async function removeAddressClaims(sql: Sql, horizon: number, after: ClaimsCursor | null): Promise<{ removed: number; next: ClaimsCursor | null }> {
  const from = after ?? FIRST_CLAIM;
  const { rows } = await sql.query<{ removed: number; profile_id: string | null; channel: string | null; at: string | null; id: string | null }>(
    `WITH batch AS MATERIALIZED (
       SELECT profile_id, channel, at, id FROM address_claims
       WHERE (profile_id, channel, at, id) > ($2::uuid, $3::text, $4::int8, $5::int8)
       ORDER BY profile_id, channel, at, id LIMIT ${MAINTENANCE_BATCH}),
     gone AS (
       DELETE FROM address_claims c USING batch b
       WHERE c.id = b.id AND b.at <= $1::int8 AND EXISTS (
         SELECT 1 FROM address_claims w
         WHERE w.profile_id = b.profile_id AND w.channel = b.channel AND w.at <= $1::int8 AND (w.at, w.id) > (b.at, b.id))
       RETURNING 1),
     last AS (SELECT * FROM batch ORDER BY profile_id DESC, channel DESC, at DESC, id DESC LIMIT 1)
     SELECT (SELECT count(*) FROM gone)::int AS removed, l.profile_id::text, l.channel, l.at::text, l.id::text
     FROM (SELECT 1) one LEFT JOIN last l ON true`,
    [horizon, from.profileId, from.channel, from.at, from.id],
  );
  const r = rows[0];
  const next = r.profile_id === null ? null : { profileId: r.profile_id, channel: r.channel!, at: r.at!, id: r.id! };
  return { removed: r.removed, next };
}

/** How long a relayed outbox row is kept (to look at what was relayed lately): the relay itself never reads one again. */
export const RELAYED_OUTBOX_KEEP_MS = 3_600_000;

/** Relayed outbox rows older than RELAYED_OUTBOX_KEEP_MS, one batch; returns how many. */
export async function removeRelayedOutbox(sql: Sql, now: number): Promise<number> {
  const { rows } = await sql.query<{ n: number }>(
    `WITH gone AS (DELETE FROM outbox_events WHERE id IN (
        SELECT id FROM outbox_events WHERE relayed_at < $1 ORDER BY relayed_at, id LIMIT ${MAINTENANCE_BATCH}) RETURNING 1)
     SELECT count(*)::int AS n FROM gone`,
    [new Date(now - RELAYED_OUTBOX_KEEP_MS)],
  );
  return rows[0].n;
}

/** Whether a pre-partitioning events table is still there. */
export async function hasLegacyEvents(sql: Sql): Promise<boolean> {
  const { rows } = await sql.query<{ t: string | null }>(`SELECT to_regclass('public.events_legacy')::text AS t`);
  return rows[0].t !== null;
}

/**
 * The received times of events_legacy (min, max), by each environment's index: exact, without a
 * scan of the table.
 */
async function legacyRange(sql: Sql): Promise<{ min: Date | null; max: Date | null }> {
  const { rows } = await sql.query<{ min: Date | null; max: Date | null }>(
    `SELECT min((SELECT min(received_at) FROM events_legacy l WHERE l.environment_id = e.id)) AS min,
            max((SELECT max(received_at) FROM events_legacy l WHERE l.environment_id = e.id)) AS max
     FROM environments e`,
  );
  return rows[0];
}

/**
 * Moves events_legacy into the partitions, a batch per transaction in id order, and drops it
 * once every row is moved: each row is claimed in event_ids first and inserted only where the
 * claim is new (one that arrived again meanwhile is kept once: the copy already stored), so a
 * run cut short anywhere and run again loses and doubles nothing. Its progress is the last id
 * moved (events_legacy_moved, written in the batch's transaction). Rows past the retention are
 * not moved. `until` bounds the time spent (one batch at least); returns the rows moved.
 */
export async function moveLegacyEvents(
  pool: pg.Pool,
  client: Sql,
  opts: { now: number; retentionDays: number | null; until: number },
): Promise<{ moved: number; done: boolean }> {
  if (!(await hasLegacyEvents(client))) return { moved: 0, done: true };
  const bound = retentionBound(opts.now, opts.retentionDays);
  const range = await legacyRange(client);
  if (range.min && range.max) await createPartitionsFor(pool, Math.max(range.min.getTime(), bound ?? -Infinity), range.max.getTime());
  await client.query('CREATE TABLE IF NOT EXISTS events_legacy_moved (last_id bigint NOT NULL)');
  await client.query('INSERT INTO events_legacy_moved SELECT -1 WHERE NOT EXISTS (SELECT 1 FROM events_legacy_moved)');
  const columns = `id, environment_id, message_id, message_hash, event, user_id, anonymous_id, "timestamp", received_at, payload, status,
                   within_limits, limit_reason, drives_journeys, error, processed_at, journeys_at, journey_user`;
  let moved = 0;
  do {
    const { rows } = await client.query<{ last: string | null; n: number }>(
      `WITH batch AS MATERIALIZED (
         SELECT ${columns} FROM events_legacy WHERE id > (SELECT last_id FROM events_legacy_moved) ORDER BY id LIMIT ${MAINTENANCE_BATCH}),
       claimed AS (
         INSERT INTO event_ids (environment_id, message_hash, received_at)
         SELECT environment_id, message_hash, received_at FROM batch WHERE received_at >= coalesce($1::timestamptz, '-infinity')
         ON CONFLICT DO NOTHING RETURNING environment_id, message_hash),
       stored AS (
         INSERT INTO events (${columns}, user_key)
         SELECT ${columns.replace(/("\w+"|\w+)/g, 'b.$1')}, intake_padded_user_key(b.user_id)
           FROM batch b JOIN claimed c ON c.environment_id = b.environment_id AND c.message_hash = b.message_hash
         RETURNING 1),
       progress AS (UPDATE events_legacy_moved SET last_id = (SELECT max(id) FROM batch) WHERE EXISTS (SELECT 1 FROM batch))
       SELECT (SELECT max(id) FROM batch)::text AS last, (SELECT count(*) FROM stored)::int AS n`,
      [bound === null ? null : new Date(bound)],
    );
    moved += rows[0].n;
    if (rows[0].last === null) {
      await client.query('DROP TABLE events_legacy');
      await client.query('DROP TABLE events_legacy_moved');
      return { moved, done: true };
    }
  } while (Date.now() < opts.until);
  return { moved, done: false };
}

export interface TableStorage {
  table: string;
  /** Exact below 64 MB; above, PostgreSQL's estimate as of the table's last ANALYZE (`rowsEstimated`). */
  rows: number;
  rowsEstimated: boolean;
  bytes: number;
}

/** The tables holding the rows of `$1`: a plain table itself, a partitioned one its partitions. */
const LEAVES = `SELECT relid FROM pg_partition_tree($1::regclass) WHERE isleaf
                UNION ALL SELECT $1::regclass WHERE (SELECT relkind FROM pg_class WHERE oid = $1::regclass) = 'r'`;

/** Bytes on disk of a table (with indexes and TOAST; of a partitioned table, all its partitions). */
export async function tableBytes(sql: Sql, table: string): Promise<number> {
  const { rows } = await sql.query<{ bytes: string }>(`SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::text AS bytes FROM (${LEAVES}) t`, [table]);
  return Number(rows[0].bytes);
}

/** Rows and bytes (with indexes and TOAST) of one table, or of a partitioned table's partitions together. */
export async function tableStorage(sql: Sql, table: string): Promise<TableStorage> {
  const { rows } = await sql.query<{ bytes: string; heap: string; estimate: string }>(
    `SELECT coalesce(sum(pg_total_relation_size(t.relid)), 0)::text AS bytes, coalesce(sum(pg_relation_size(t.relid)), 0)::text AS heap,
            coalesce(sum(greatest(c.reltuples, 0)), 0)::bigint::text AS estimate
     FROM (${LEAVES}) t JOIN pg_class c ON c.oid = t.relid`,
    [table],
  );
  const { bytes, heap, estimate } = rows[0];
  if (Number(heap) < 64 * 1024 * 1024) {
    const exact = await sql.query<{ n: string }>(`SELECT count(*)::text AS n FROM ${table}`);
    return { table, rows: Number(exact.rows[0].n), rowsEstimated: false, bytes: Number(bytes) };
  }
  return { table, rows: Number(estimate), rowsEstimated: true, bytes: Number(bytes) };
}

/** The received time of the oldest event in `partition`, by each environment's index (no scan of the partition). */
export async function oldestEventIn(sql: Sql, partition: string): Promise<Date | null> {
  const { rows } = await sql.query<{ at: Date | null }>(
    `SELECT min((SELECT min(received_at) FROM "${partition}" p WHERE p.environment_id = e.id)) AS at FROM environments e`,
  );
  return rows[0].at;
}
