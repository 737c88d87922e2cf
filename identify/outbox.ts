// Transactional outbox. Identify writes its service events here in the same transaction as
// the profile change; workers/outbox-relay.ts moves them to the service-events queue. A
// Redis outage therefore delays a service event but can never lose it.
import type pg from 'pg';
import type { Db, Tx } from '../platform/db.ts';

export { SERVICE_EVENTS } from '../events/service-events.ts';

/** NOTIFY channel that wakes the relay as soon as a transaction with outbox rows commits. */
export const OUTBOX_CHANNEL = 'intake_outbox';

/** Wakes the relay; called after a commit that wrote outbox rows. */
export type OutboxNotify = () => void;

/** A NOTIFY goes at most this often: a busy gateway commits hundreds of batches a second. */
export const NOTIFY_GAP_MS = 20;

/**
 * NOTIFY after the commit, on its own, never inside the writing transaction: a NOTIFY makes its
 * transaction take PostgreSQL's one database-wide notify lock from commit until its WAL flush
 * is done, and that serialized every Identify commit of every gateway (measured: commits
 * waiting on `Lock: object`). At most one NOTIFY is in flight, and the next goes no sooner than
 * `gapMs` after it: calls meanwhile fold into that one (one NOTIFY per batch was a round trip
 * and a backend's wake-up per batch). A NOTIFY lost with a crash or an outage only delays the
 * relay to its next poll.
 */
export function createOutboxNotify(pool: pg.Pool, gapMs = NOTIFY_GAP_MS): OutboxNotify {
  let busy = false; // a NOTIFY is in flight or waiting for its turn
  let again = false;
  let last = -Infinity;
  const sendInTurn = () => {
    const wait = last + gapMs - performance.now();
    if (wait > 0) setTimeout(send, wait).unref();
    else send();
  };
  const send = () => {
    again = false;
    last = performance.now();
    pool
      .query(`SELECT pg_notify('${OUTBOX_CHANNEL}', '')`)
      .catch(() => {})
      .finally(() => {
        if (again) sendInTurn();
        else busy = false;
      });
  };
  return () => {
    if (busy) again = true;
    else {
      busy = true;
      sendInTurn();
    }
  };
}

export interface OutboxRow {
  id: bigint;
  environment_id: string;
  kind: string;
  payload: string;
  created_at: Date;
}

/**
 * Hands up to `limit` unrelayed rows to `deliver` and marks them relayed when it returns,
 * all in one transaction: if delivery throws, the rows stay for the next round. Rows locked
 * by another relay are skipped, so several workers can relay at once.
 */
export async function relayOutbox(db: Db, limit: number, deliver: (rows: OutboxRow[]) => Promise<void>): Promise<number> {
  return db.$transaction(
    async (tx) => {
      const rows = await tx.$queryRaw<OutboxRow[]>`
        SELECT id, environment_id, kind, payload, created_at FROM outbox_events
        WHERE relayed_at IS NULL ORDER BY id LIMIT ${limit} FOR UPDATE SKIP LOCKED`;
      if (!rows.length) return 0;
      await deliver(rows);
      await tx.$executeRaw`UPDATE outbox_events SET relayed_at = now() WHERE id = ANY(${rows.map((r) => r.id)}::bigint[])`;
      return rows.length;
    },
    { maxWait: 10_000, timeout: 30_000 },
  );
}
