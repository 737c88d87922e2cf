// Moves Identify's service events from the PostgreSQL outbox to the service-events queue.
// Woken by NOTIFY when a transaction with outbox rows commits, and by a timer as a fallback
// (a NOTIFY is lost while the listening connection is down).
import pg from 'pg';
import type { Queue } from 'bullmq';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import type { ServiceEventJob } from '../common/queues.ts';
import { OUTBOX_CHANNEL, relayOutbox, type OutboxRow } from '../common/store/outbox.ts';
import { withTimeout } from '../common/with-timeout.ts';

const BATCH = 500;
const POLL_MS = 1000;
const ADD_TIMEOUT_MS = 5000;

export interface OutboxRelay {
  close(): Promise<void>;
}

export function toServiceEventJob(row: OutboxRow): { name: string; data: ServiceEventJob; opts: { jobId: string } } {
  const outboxId = row.id.toString();
  return {
    name: row.kind,
    data: { outboxId, environmentId: row.environment_id, kind: row.kind, createdAt: row.created_at.getTime(), payload: row.payload },
    opts: { jobId: `o${outboxId}` },
  };
}

export function startOutboxRelay(deps: { config: Config; db: Db; queue: Queue<ServiceEventJob>; log: Logger }): OutboxRelay {
  const { config, db, queue, log } = deps;
  let stopped = false;
  let wake: (() => void) | null = null;
  let listener: pg.Client | null = null;

  // If the add lands after the timeout, the rows are relayed again and the jobIds dedupe them.
  const deliver = async (rows: OutboxRow[]) => {
    await withTimeout(queue.addBulk(rows.map(toServiceEventJob)), ADD_TIMEOUT_MS, 'queue unavailable');
  };

  async function listen() {
    try {
      const client = new pg.Client({ connectionString: config.databaseUrl, keepAlive: true });
      client.on('error', () => {});
      client.on('end', () => {
        listener = null;
        if (!stopped) setTimeout(listen, POLL_MS);
      });
      client.on('notification', () => wake?.());
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
      listener = client;
    } catch {
      if (!stopped) setTimeout(listen, POLL_MS);
    }
  }

  async function loop() {
    let failures = 0;
    while (!stopped) {
      try {
        const moved = await relayOutbox(db, BATCH, deliver);
        failures = 0;
        if (moved) log.debug({ moved }, 'outbox relayed');
        if (moved === BATCH) continue;
      } catch (err) {
        failures++;
        if (failures === 1 || failures % 30 === 0) log.warn({ err: (err as Error).message }, 'outbox relay failed; retrying');
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, failures ? Math.min(POLL_MS * 2 ** failures, 10_000) : POLL_MS);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  }

  void listen();
  const running = loop();
  return {
    async close() {
      stopped = true;
      wake?.();
      await running;
      await listener?.end().catch(() => {});
    },
  };
}
