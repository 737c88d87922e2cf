import type { Db } from '../db.ts';
import { hashStored } from '../domain/identity-hash.ts';
import { fromPgText, toPgText } from '../domain/pg-text.ts';

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

/**
 * One row per environment and messageId, many rows in one statement: a repeat (redelivery,
 * crash retry, second gateway, or twice in one batch) stores nothing. The one exception: a
 * row recorded as `failed` becomes `processed` when the event is delivered again and
 * succeeds (an operator retried it from the dead-letter queue). Returns how many rows it wrote.
 * The only INSERT into events: every path (batches, their bisection, failures) goes through it.
 */
export async function insertEventsOnce(db: Db, rows: EventRow[]): Promise<number> {
  const unique = new Map<string, EventRow>();
  for (const r of rows) {
    const key = `${r.environmentId}\0${r.messageId}`;
    if (!unique.has(key)) unique.set(key, r);
  }
  const list = [...unique.values()];
  const col = <K extends keyof EventRow>(k: K) => list.map((r) => r[k]);
  const text = (values: (string | null)[]) => values.map((v) => (v === null ? null : toPgText(v)));
  const messageIds = text(col('messageId')) as string[];
  return db.$executeRaw`
    INSERT INTO events (environment_id, message_id, message_hash, event, user_id, anonymous_id, "timestamp", received_at,
                        payload, status, within_limits, limit_reason, drives_journeys, error)
    SELECT e, m, h, n, u, a, to_timestamp(t / 1000.0), to_timestamp(r / 1000.0), p, s, w, l, d, x
    FROM unnest(${col('environmentId')}::uuid[], ${messageIds}::text[], ${messageIds.map(hashStored)}::bytea[], ${text(col('event'))}::text[],
                ${text(col('userId'))}::text[], ${text(col('anonymousId'))}::text[], ${col('timestampMs')}::float8[],
                ${col('receivedAt')}::float8[], ${col('payload')}::text[], ${col('status')}::text[],
                ${col('withinLimits')}::bool[], ${col('limitReason')}::text[], ${col('drivesJourneys')}::bool[], ${col('error')}::text[])
         AS batch(e, m, h, n, u, a, t, r, p, s, w, l, d, x)
    ON CONFLICT (environment_id, message_hash) DO UPDATE
      SET status = EXCLUDED.status, error = NULL, processed_at = now()
      WHERE events.status = 'failed' AND EXCLUDED.status = 'processed'`;
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

/** The one lookup of a stored event by its key (the digest), the full messageId compared. */
async function findRow(db: Db, environmentId: string, messageId: string) {
  const stored = toPgText(messageId);
  const row = await db.event.findUnique({ where: { environmentId_messageHash: { environmentId, messageHash: hashStored(stored) } } });
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
