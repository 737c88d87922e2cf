import { Worker, type Job } from 'bullmq';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import {
  EVENTS_QUEUE,
  SERVICE_EVENTS_QUEUE,
  closeQueues,
  createEventsQueue,
  createServiceEventsQueue,
  type EventJob,
  type ServiceEventJob,
} from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';
import { readiness } from '../common/with-timeout.ts';
import { SERVICE_EVENTS } from '../common/store/outbox.ts';
import { startJourneyTimers } from './journey-timers.ts';
import { createWorkerMetrics, serveWorkerMetrics } from './metrics.ts';
import { createJourneyEngine } from './journeys.ts';
import { startOutboxRelay } from './outbox-relay.ts';
import { createWatermark } from './watermark.ts';
import { createEventPersister, persistEvent } from './persist-event.ts';

export interface Workers {
  close(): Promise<void>;
}

export async function startWorkers(deps: { config: Config; db: Db; log: Logger }): Promise<Workers> {
  const { config, db, log } = deps;
  const connection = createRedis(config, 'worker', log);
  const eventsQueue = createEventsQueue(config, connection);
  const relayQueue = createServiceEventsQueue(config, connection);
  for (const queue of [eventsQueue, relayQueue]) queue.on('error', (err) => log.warn({ err: err.message, queue: queue.name }, 'queue'));
  const metrics = createWorkerMetrics({ [EVENTS_QUEUE]: eventsQueue, [SERVICE_EVENTS_QUEUE]: relayQueue });
  const journeys = createJourneyEngine({ db, log, metrics, ...createWatermark(eventsQueue, config.journeyGraceMs) });
  const persist = createEventPersister(db, journeys, {
    maxBatch: config.workerBatchMax,
    waitMs: config.workerBatchWaitMs,
    onBatch: (n) => metrics.batchSize.observe(n),
  });
  // Made once: a labelled inc() builds its label key on every call, and this runs per event.
  const storedEvents = metrics.events.labels({ outcome: 'stored' });
  const events = new Worker<EventJob>(
    EVENTS_QUEUE,
    async (job) => {
      const started = performance.now();
      await persist(job.data);
      storedEvents.inc();
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
    metrics.events.inc({ outcome: final ? 'failed' : 'retried' });
    log.warn({ queue: EVENTS_QUEUE, jobId: job.id, attempt: job.attemptsMade, final, err: err.message }, 'event job failed');
    if (!final) return;
    await persistEvent(db, job.data, 'failed', err.message).catch((e: Error) =>
      log.error({ jobId: job.id, err: e.message }, 'could not record the failed event'),
    );
  }

  // Service events relayed from the outbox: profile changes can start attribute-triggered
  // journeys; consent changes are read when a send step runs, so they need nothing here.
  const serviceEvents = new Worker<ServiceEventJob>(
    SERVICE_EVENTS_QUEUE,
    async (job) => {
      const started = performance.now();
      if (job.data.kind === SERVICE_EVENTS.profileFieldsChanged) await journeys.handleProfileChange(job.data);
      log.info({ queue: SERVICE_EVENTS_QUEUE, jobId: job.id, kind: job.data.kind, ms: Math.round(performance.now() - started) }, 'service event handled');
    },
    { connection, prefix: config.queuePrefix, concurrency: config.workerConcurrency, lockDuration: config.workerLockMs },
  );
  serviceEvents.on('error', (err) => log.warn({ err: err.message }, 'service-events worker'));
  const relay = startOutboxRelay({ config, db, queue: relayQueue, log });
  const timers = startJourneyTimers({ engine: journeys, tickMs: config.journeyTickMs, log });

  const ready = () => readiness({ db, redis: connection });
  const metricsServer = await serveWorkerMetrics(metrics.registry, { port: config.workerMetricsPort, host: config.host, log, ready });
  await Promise.all([events.waitUntilReady(), serviceEvents.waitUntilReady()]).catch(() => {});
  log.info({ concurrency: config.workerConcurrency, metricsPort: metricsServer.port }, 'worker started');
  if (config.journeyGraceMs < config.enqueueTimeoutMs) {
    log.warn(
      { journeyGraceMs: config.journeyGraceMs, enqueueTimeoutMs: config.enqueueTimeoutMs },
      'JOURNEY_GRACE_MS is below ENQUEUE_TIMEOUT_MS: a journey may move on before an event answered 202 reaches the queue',
    );
  }
  return {
    async close() {
      await relay.close();
      await Promise.all([events.close(), serviceEvents.close(), timers.close()]);
      await Promise.all([closeQueues([relayQueue, eventsQueue], connection), metricsServer.close()]);
      log.info('worker stopped');
    },
  };
}
