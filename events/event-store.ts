import { isNoPartitionFor, poolOf, type Db } from '../platform/db.ts';
import { pgArrayLiteral } from '../platform/pg-array.ts';
import { hashStored, storedHashHex } from '../platform/identity-hash.ts';
import { fromPgText, toPgText } from '../platform/pg-text.ts';
import { retentionCutoff } from './partition-plan.ts';
import { paddedUserKey } from '../profiles/person.ts';

export type EventStatus = 'processed' | 'failed';

export interface EventRow {
  environmentId: string;
  messageId: string;
  event: string;
  userId: string | null;
  anonymousId: string | null;
  timestampMs: number;
  receivedAt: number;
  payload: string;
  status: EventStatus;
  withinLimits: boolean;
  limitReason: string | null;
  drivesJourneys: boolean;
  error: string | null;
}

/** What decides whether a repeated messageId is the same event (decisions.md "The messageId identity window is the retention"). */
export interface IdentityWindow {
  /** EVENTS_RETENTION_DAYS: null keeps events, and so their identities, forever. */
  retentionDays: number | null;
}

/**
 * One row per environment and messageId, many rows in one statement: a repeat (redelivery,
 * crash retry, second gateway, or twice in one batch) stores nothing. The identity is a row of
 * event_ids, claimed in the same statement as the event is inserted (a partitioned table holds
 * no unique index across its partitions): the event is inserted only where its claim was new,
 * whichever day's partition the first copy landed in, or where the first copy's day is past
 * the retention as of the new copy's receipt (partition-plan.ts retentionCutoff): then the
 * claim moves to the new copy, whether or not the maintenance has removed that day yet. The
 * first copy received wins: a copy received earlier than the stored one, which a worker reached
 * later, takes its place. The one exception: a row recorded as `failed` becomes `processed` when the event is delivered
 * again and succeeds (an operator retried it from the dead-letter queue); that takes a second
 * statement, only when a batch of `processed` rows met an earlier claim. Returns how many rows
 * it wrote. The only INSERT into events: every path (batches, their bisection, failures) goes
 * through it.
 */
export async function insertEventsOnce(db: Db, rows: EventRow[], window: IdentityWindow = { retentionDays: null }): Promise<number> {
  const unique = new Map<string, EventRow>();
  for (const r of rows) {
    const key = `${r.environmentId}\0${r.messageId}`;
    if (!unique.has(key)) unique.set(key, r);
  }
  const list = [...unique.values()];
  const col = <K extends keyof EventRow>(k: K) => list.map((r) => r[k]);
  const text = (values: (string | null)[]) => values.map((v) => (v === null ? null : toPgText(v)));
  const messageIds = text(col('messageId')) as string[];
  // Hex, decoded by the statement: a Buffer each would be a native allocation, then hex again in node-postgres.
  const hashes = messageIds.map(storedHashHex);
  const userIds = text(col('userId'));
  // The node-postgres pool, not Prisma: a batch is 14 arrays of up to WORKER_BATCH_MAX values,
  // and Prisma's adapter would cost more client time than the statement's own work. Named, so
  // each connection parses it once.
  const values = [
    col('environmentId'),
    messageIds,
    hashes,
    text(col('event')),
    userIds,
    text(col('anonymousId')),
    col('timestampMs'),
    col('receivedAt'),
    col('payload'),
    col('status'),
    col('withinLimits'),
    col('limitReason'),
    col('drivesJourneys'),
    col('error'),
    userIds.map(paddedUserKey),
    list.map((r) => retentionCutoff(r.receivedAt, window.retentionDays)),
  ].map((v) => pgArrayLiteral(v) ?? v);
  const {
    rows: [{ n, me, mh, mr }],
  } = await poolOf(db).query<{ n: number; me: string[] | null; mh: string[] | null; mr: string[] | null }>({
    name: 'intake-insert-events',
    text: INSERT_EVENTS,
    values,
  });
  if (me) await poolOf(db).query({ name: 'intake-displace-later-copies', text: DISPLACE_LATER_COPIES, values: [me, mh, mr] });
  if (n === list.length || !list.some((r) => r.status === 'processed')) return n;
  const revive = list.filter((r) => r.status === 'processed');
  const revived = await db.$executeRaw`
    UPDATE events SET status = 'processed', error = NULL, processed_at = now()
    FROM event_ids i, unnest(${revive.map((r) => r.environmentId)}::uuid[], ${revive.map((r) => hashStored(toPgText(r.messageId)))}::bytea[]) AS batch(e, h)
    WHERE i.environment_id = batch.e AND i.message_hash = batch.h
      AND events.environment_id = i.environment_id AND events.received_at = i.received_at AND events.message_hash = i.message_hash
      AND events.status = 'failed'`;
  return n + revived;
}

// $16: the start of the oldest day still within retention as of each row's receipt (null:
// forever); a claim older than it belongs to a copy that retention removes, and moves to this one.
// A claim younger than this row belongs to a copy received after it but stored first (the two
// batches reached the workers in the other order): the claim moves to this one, the copy
// received first, and the other copy's row is deleted (DISPLACE_LATER_COPIES): the event a
// messageId keeps is the one answered first.
const INSERT_EVENTS = `
  WITH batch AS MATERIALIZED (
    SELECT e, m, decode(h, 'hex') AS h, n, u, a, t, to_timestamp(r / 1000.0)::timestamptz(3) AS r, p, s, w, l, d, x, k, to_timestamp(c / 1000.0)::timestamptz(3) AS c
    FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[], $8::float8[], $9::text[], $10::text[],
                $11::bool[], $12::text[], $13::bool[], $14::text[], $15::text[], $16::float8[])
         AS batch(e, m, h, n, u, a, t, r, p, s, w, l, d, x, k, c)
  ), claimed AS (
    INSERT INTO event_ids AS i (environment_id, message_hash, received_at)
    SELECT e, h, r FROM batch
    ON CONFLICT (environment_id, message_hash) DO UPDATE SET received_at = EXCLUDED.received_at
      WHERE i.received_at < (SELECT b.c FROM batch b WHERE b.e = EXCLUDED.environment_id AND b.h = EXCLUDED.message_hash)
         OR i.received_at > EXCLUDED.received_at
    RETURNING environment_id, message_hash, received_at, xmax::text <> '0' AS moved
  ), stored AS (
    INSERT INTO events (environment_id, message_id, message_hash, event, user_id, anonymous_id, "timestamp", received_at,
                        payload, status, within_limits, limit_reason, drives_journeys, error, user_key)
    SELECT e, m, h, n, u, a, to_timestamp(t / 1000.0), r, p, s, w, l, d, x, k
    FROM batch JOIN claimed ON claimed.environment_id = batch.e AND claimed.message_hash = batch.h
    RETURNING 1
  )
  SELECT (SELECT count(*)::int FROM stored) AS n, m.*
  FROM (SELECT array_agg(environment_id::text) AS me, array_agg(encode(message_hash, 'hex')) AS mh, array_agg(received_at::text) AS mr
        FROM claimed WHERE moved) m`;

// A claim that moved to a copy received earlier: the copies received after it are deleted. A
// second statement, because the copy it displaces may have been committed by another worker
// while this statement ran, after its snapshot; only a statement begun later sees it. It walks the
// environment's events received after this copy: its wait in the queue, seconds for most (a
// claim moved by the retention has none after it).
const DISPLACE_LATER_COPIES = `
  DELETE FROM events ev
  USING unnest($1::uuid[], $2::text[], $3::timestamptz[]) AS m(e, h, r)
  WHERE ev.environment_id = m.e AND ev.message_hash = decode(m.h, 'hex') AND ev.received_at > m.r`;

/** Whether PostgreSQL refused an insert because no partition of events holds the row's received_at (db.ts isNoPartitionFor). */
export function isMissingPartition(err: unknown): boolean {
  return isNoPartitionFor(err, 'events');
}

export interface StoredEvent {
  messageId: string;
  status: EventStatus;
  receivedAt: number;
  processedAt: number;
  withinLimits: boolean;
  limitReason: string | null;
  drivesJourneys: boolean;
  error: string | null;
  event: unknown;
}

/**
 * The one lookup of a stored event by its key (the digest), the full messageId compared: its
 * identity row gives its received_at, which names its partition and leads its index.
 */
async function findRow(db: Db, environmentId: string, messageId: string) {
  const stored = toPgText(messageId);
  const messageHash = hashStored(stored);
  const identity = await db.eventId.findUnique({ where: { environmentId_messageHash: { environmentId, messageHash } } });
  if (!identity) return null;
  const row = await db.event.findFirst({ where: { environmentId, receivedAt: identity.receivedAt, messageHash } });
  return row && row.messageId === stored ? row : null;
}

export async function findEvent(db: Db, environmentId: string, messageId: string): Promise<StoredEvent | null> {
  const row = await findRow(db, environmentId, messageId);
  if (!row) return null;
  return {
    messageId,
    status: row.status as EventStatus,
    receivedAt: row.receivedAt.getTime(),
    processedAt: row.processedAt.getTime(),
    withinLimits: row.withinLimits,
    limitReason: row.limitReason,
    drivesJourneys: row.drivesJourneys,
    error: row.error,
    event: JSON.parse(row.payload),
  };
}

/** A stored `failed` event as the gateway queued it (to send it through the worker again), or null when there is none. */
export async function findFailedEvent(
  db: Db,
  environmentId: string,
  messageId: string,
): Promise<{ environmentId: string; messageId: string; receivedAt: number; timestampMs: number; payload: string } | null> {
  const row = await findRow(db, environmentId, messageId);
  if (!row || row.status !== 'failed') return null;
  return { environmentId, messageId, receivedAt: row.receivedAt.getTime(), timestampMs: row.timestamp.getTime(), payload: row.payload };
}

/** The custom events list: names received in the environment in the last `days` days. */
export async function eventNames(db: Db, environmentId: string, days: number): Promise<{ event: string; lastSeenAt: number; count: number }[]> {
  const since = new Date(Date.now() - days * 86_400_000);
  const rows = await db.event.groupBy({
    by: ['event'],
    where: { environmentId, receivedAt: { gte: since } },
    _max: { receivedAt: true },
    _count: { _all: true },
    orderBy: { event: 'asc' },
  });
  return rows.map((r) => ({ event: fromPgText(r.event), lastSeenAt: r._max.receivedAt!.getTime(), count: r._count._all }));
}

/** An event as the dashboard's live view lists it. */
export interface RecentEvent {
  event: string;
  messageId: string;
  userId: string | null;
  anonymousId: string | null;
  status: EventStatus | 'pending';
  receivedAt: number;
  error: string | null;
}

/** How many of an environment's newest events a search by user ID looks through (no index serves it). */
export const USER_SEARCH_DEPTH = 100_000;

/**
 * The newest stored events of an environment (its (environment_id, received_at) index), or the
 * one with a messageId (its key), or those of a userId (or anonymousId) among the newest
 * USER_SEARCH_DEPTH: a bounded scan, whatever the table's size.
 */
export async function recentEvents(db: Db, environmentId: string, filter: { messageId?: string; userId?: string }, limit: number): Promise<RecentEvent[]> {
  const toRecent = (r: {
    event: string;
    messageId: string;
    userId: string | null;
    anonymousId: string | null;
    status: string;
    receivedAt: Date;
    error: string | null;
  }) => ({
    event: fromPgText(r.event),
    messageId: fromPgText(r.messageId),
    userId: r.userId === null ? null : fromPgText(r.userId),
    anonymousId: r.anonymousId === null ? null : fromPgText(r.anonymousId),
    status: r.status as EventStatus,
    receivedAt: r.receivedAt.getTime(),
    error: r.error,
  });
  if (filter.messageId !== undefined) {
    const row = await findRow(db, environmentId, filter.messageId);
    return row ? [toRecent(row)] : [];
  }
  if (filter.userId !== undefined) {
    const id = toPgText(filter.userId);
    const rows = await db.$queryRaw<
      { event: string; messageId: string; userId: string | null; anonymousId: string | null; status: string; receivedAt: Date; error: string | null }[]
    >`
      SELECT event, "messageId", "userId", "anonymousId", status, "receivedAt", error FROM (
        SELECT event, message_id AS "messageId", user_id AS "userId", anonymous_id AS "anonymousId", status, received_at AS "receivedAt", error
        FROM events WHERE environment_id = ${environmentId}::uuid ORDER BY received_at DESC LIMIT ${USER_SEARCH_DEPTH}
      ) newest WHERE "userId" = ${id} OR "anonymousId" = ${id} LIMIT ${limit}`;
    return rows.map(toRecent);
  }
  const rows = await db.event.findMany({
    where: { environmentId },
    orderBy: { receivedAt: 'desc' },
    take: limit,
    select: { event: true, messageId: true, userId: true, anonymousId: true, status: true, receivedAt: true, error: true },
  });
  return rows.map(toRecent);
}
