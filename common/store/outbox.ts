// Transactional outbox. Identify writes its service events here in the same transaction as
// the profile change; workers/outbox-relay.ts moves them to the service-events queue. A
// Redis outage therefore delays a service event but can never lose it.
import type { Db, Tx } from '../db.ts';
import { stringifyJson } from '../domain/json-text.ts';

export { SERVICE_EVENTS } from '../domain/service-events.ts';

/** NOTIFY channel that wakes the relay as soon as a transaction with outbox rows commits. */
export const OUTBOX_CHANNEL = 'intake_outbox';

export interface OutboxRow {
  id: bigint;
  environment_id: string;
  kind: string;
  payload: string;
  created_at: Date;
}

export async function writeOutbox(tx: Tx, environmentId: string, events: { kind: string; payload: unknown }[]): Promise<void> {
  for (const e of events) {
    await tx.$executeRaw`INSERT INTO outbox_events (environment_id, kind, payload) VALUES (${environmentId}::uuid, ${e.kind}, ${stringifyJson(e.payload)})`;
  }
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
