import { Worker, type Job } from 'bullmq';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import { EVENTS_QUEUE, SERVICE_EVENTS_QUEUE, createServiceEventsQueue, type EventJob, type ServiceEventJob } from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';
import { startOutboxRelay } from './outbox-relay.ts';
import { createEventPersister, persistEvent } from './persist-event.ts';

export interface Workers {
  close(): Promise<void>;
}

export async function startWorkers(deps: { config: Config; db: Db; log: Logger }): Promise<Workers> {
  const { config, db, log } = deps;
  const connection = createRedis(config, 'worker', log);
  const persist = createEventPersister(db, { maxBatch: config.workerBatchMax, waitMs: config.workerBatchWaitMs });
  const events = new Worker<EventJob>(
    EVENTS_QUEUE,
    async (job) => {
      const started = performance.now();
      await persist(job.data);
      log.info({ queue: EVENTS_QUEUE, jobId: job.id, attempt: job.attemptsMade + 1, ms: Math.round(performance.now() - started) }, 'event persisted');
    },
    {
      connection,
      prefix: config.queuePrefix,
      concurrency: config.workerConcurrency,
      // A killed worker's jobs return to the queue after the lock lapses; a kill is not a
      // reason to fail an event, so allow several stalls before BullMQ gives up on a job.
      lockDuration: config.workerLockMs,
      stalledInterval: Math.max(1000, Math.floor(config.workerLockMs / 2)),
      maxStalledCount: 10,
    },
  );
  events.on('error', (err) => log.warn({ err: err.message }, 'events worker'));
  events.on('failed', (job, err) => void onFailed(job, err));

  /** After the last attempt the event is stored with status `failed`, and the job stays in Redis for inspection. */
  async function onFailed(job: Job<EventJob> | undefined, err: Error) {
    if (!job) return;
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || err.name === 'UnrecoverableError';
    log.warn({ queue: EVENTS_QUEUE, jobId: job.id, attempt: job.attemptsMade, final, err: err.message }, 'event job failed');
    if (!final) return;
    await persistEvent(db, job.data, 'failed', err.message).catch((e: Error) =>
      log.error({ jobId: job.id, err: e.message }, 'could not record the failed event'),
    );
  }

  // Service events (profile_fields_changed, subscription_changed) relayed from the outbox.
  // Journeys consume them; until a journey uses them they are only acknowledged.
  const serviceEvents = new Worker<ServiceEventJob>(
    SERVICE_EVENTS_QUEUE,
    async (job) => log.debug({ queue: SERVICE_EVENTS_QUEUE, jobId: job.id, kind: job.data.kind }, 'service event'),
    { connection, prefix: config.queuePrefix, concurrency: config.workerConcurrency, lockDuration: config.workerLockMs },
  );
  serviceEvents.on('error', (err) => log.warn({ err: err.message }, 'service-events worker'));
  const relayQueue = createServiceEventsQueue(config, connection);
  relayQueue.on('error', (err) => log.warn({ err: err.message }, 'service-events queue'));
  const relay = startOutboxRelay({ config, db, queue: relayQueue, log });

  await events.waitUntilReady().catch(() => {});
  log.info({ concurrency: config.workerConcurrency }, 'worker started');
  return {
    async close() {
      await relay.close();
      await Promise.all([events.close(), serviceEvents.close()]);
      await relayQueue.close().catch(() => {});
      connection.disconnect();
      log.info('worker stopped');
    },
  };
}
