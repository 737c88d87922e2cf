// Moves Identify's service events from the PostgreSQL outbox to the service-events queue.
// Woken by NOTIFY when a transaction with outbox rows commits, and by a timer as a fallback
// (a NOTIFY is lost while the listening connection is down). While Redis is full the rows wait
// in the outbox: the room left above the high-water mark is for the workers to drain the queue.
import pg from 'pg';
import type { Queue } from 'bullmq';
import type { Config } from '../platform/config.ts';
import type { Db } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceEventJob } from '../events/jobs.ts';
import type { RedisMemory } from '../platform/redis-memory.ts';
import { OUTBOX_CHANNEL, relayOutbox, type OutboxRow } from '../identify/outbox.ts';
import { startPollLoop } from '../platform/poll-loop.ts';
import { withTimeout } from '../platform/with-timeout.ts';

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

export function startOutboxRelay(deps: { config: Config; db: Db; queue: Queue<ServiceEventJob>; memory: Pick<RedisMemory, 'full'>; log: Logger }): OutboxRelay {
  const { config, db, queue, memory, log } = deps;
  let stopped = false;
  let listener: pg.Client | null = null;
  let retry: NodeJS.Timeout | undefined;
  // If the add lands after the timeout, the rows are relayed again and the jobIds dedupe them.
  const deliver = async (rows: OutboxRow[]) => {
    await withTimeout(queue.addBulk(rows.map(toServiceEventJob)), ADD_TIMEOUT_MS, 'queue unavailable');
  };

  // One LISTEN connection, replaced a second after it is lost. `listener` is set before the
  // connect so that close() also ends a connection still being opened.
  async function listen() {
    const client = new pg.Client({ connectionString: config.databaseUrl, keepAlive: true });
    listener = client;
    let lost = false;
    const onLost = () => {
      if (lost) return;
      lost = true;
      if (listener === client) listener = null;
      void client.end().catch(() => {});
      if (!stopped) retry = setTimeout(listen, POLL_MS);
    };
    client.on('error', () => {});
    client.on('end', onLost);
    client.on('notification', () => loop.wake());
    try {
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch {
      onLost();
    }
  }

  const loop = startPollLoop({
    round: async () => {
      if (memory.full()) return false;
      const moved = await relayOutbox(db, BATCH, deliver);
      if (moved) log.debug({ moved }, 'outbox relayed');
      return moved === BATCH;
    },
    intervalMs: POLL_MS,
    log,
    what: 'outbox relay',
  });
  void listen();
  return {
    async close() {
      stopped = true;
      clearTimeout(retry);
      await loop.close();
      await listener?.end().catch(() => {});
    },
  };
}
