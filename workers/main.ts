import { UnrecoverableError, type Job } from 'bullmq';
import type { Config } from '../platform/config.ts';
import { createLockPool, dbErrorMessage, poolOf, type Db } from '../platform/db.ts';
import { createTrustedClock } from '../platform/trusted-clock.ts';
import type { Logger } from '../platform/logger.ts';
import {
  DEAD_LETTER_QUEUE,
  EVENTS_QUEUE,
  SERVICE_EVENTS_QUEUE,
  allPartitions,
  closeQueues,
  createDeadLetterQueue,
  createEventsQueues,
  createServiceEventsQueue,
  type EventBatchJob,
  type QueuedEvent,
  type ServiceEventJob,
} from '../platform/queues.ts';
import { createRedis } from '../platform/redis.ts';
import { isOomError, memorySource, watchRedisMemory } from '../platform/redis-memory.ts';
import { throttleWarnings } from '../platform/warn-throttle.ts';
import { readiness } from '../platform/with-timeout.ts';
import { SERVICE_EVENTS } from '../identify/outbox.ts';
import { BackoffWorker } from './backoff-worker.ts';
import { startDeadLetters } from './dead-letter.ts';
import { startJourneyTimers } from './journey-timers.ts';
import { createWorkerMetrics, serveWorkerMetrics } from './metrics.ts';
import { createJourneyEngine } from '../journeys/engine.ts';
import { startOutboxRelay } from './outbox-relay.ts';
import { createWatermark, oldestQueuedReceipt } from './watermark.ts';
import { createEventPersister, recordBatchFailed, type Refused } from './persist-event.ts';
import { startStorageMaintenance } from './storage-maintenance.ts';
import { createErasureGuard } from '../events/erasure-guard.ts';

export interface Workers {
  /** Where GET /metrics is served (null when WORKER_METRICS_PORT was taken). */
  metricsPort: number | null;
  close(): Promise<void>;
}

/**
 * Batches a worker process stores at once (each holds one connection of the erasure guard).
 * The process's own pool (DATABASE_POOL_SIZE) serves their statements and the journeys' four
 * transactions each, so more would wait there anyway.
 */
const GUARD_CONNECTIONS = 4;

/** While errors repeat (Redis full, say), each kind is logged once and then once per this interval with its count. */
const WARN_INTERVAL_MS = 10_000;

export async function startWorkers(deps: { config: Config; db: Db; log: Logger }): Promise<Workers> {
  const { config, db, log } = deps;
  const connection = createRedis(config, 'worker', log);
  const memory = watchRedisMemory(memorySource(connection), { intervalMs: config.redisMemoryCheckMs, highWaterPercent: config.redisHighWaterPercent, log });
  const warnings = throttleWarnings(log, WARN_INTERVAL_MS);
  /** An 'error' listener: a refusal for memory marks Redis full at once; the line is throttled. */
  const warnOn = (what: string) => (err: Error) => {
    if (isOomError(err)) memory.refused();
    warnings.warn(what, err);
  };
  const eventsQueues = createEventsQueues(config, connection);
  const relayQueue = createServiceEventsQueue(config, connection);
  const deadLetters = createDeadLetterQueue(config, connection);
  for (const queue of [...eventsQueues, relayQueue, deadLetters]) queue.on('error', warnOn(`queue ${queue.name}`));
  const metrics = createWorkerMetrics({
    queues: { [EVENTS_QUEUE]: allPartitions(eventsQueues), [SERVICE_EVENTS_QUEUE]: relayQueue, [DEAD_LETTER_QUEUE]: deadLetters },
    oldestQueuedReceipt: () => oldestQueuedReceipt(eventsQueues),
    memory,
  });
  const journeys = createJourneyEngine({ db, log, metrics, ...createWatermark(eventsQueues, config.journeyGraceMs) });
  // The erasure guard's connections: batches stored at once beyond these wait their turn.
  const guardPool = createLockPool(config, GUARD_CONNECTIONS, log);
  const clock = await createTrustedClock(poolOf(db), log);
  const time = { retentionDays: config.eventsRetentionDays, now: clock.now };
  const persist = createEventPersister(db, journeys, {
    time,
    maxRows: config.workerBatchMax,
    waitMs: config.workerBatchWaitMs,
    onStatement: (n) => metrics.batchSize.observe(n),
    guard: createErasureGuard(guardPool, GUARD_CONNECTIONS),
    onDropped: (rows) => metrics.events.inc({ outcome: 'dropped' }, rows.length),
  });
  // Made once: a labelled inc() builds its label key on every call.
  const counted = {
    stored: metrics.events.labels({ outcome: 'stored' }),
    failed: metrics.events.labels({ outcome: 'failed' }),
    retried: metrics.events.labels({ outcome: 'retried' }),
    completed: metrics.batches.labels({ outcome: 'completed' }),
  };

  const deadLettered = startDeadLetters({
    config,
    connection,
    queue: deadLetters,
    persist,
    onStored: () => counted.stored.inc(),
    onError: warnOn('dead-letter worker'),
    log,
  });

  /**
   * One debug line per event of a batch job, naming its messageId: what an operator greps for.
   * Off at the default level, where a line per event would be as many lines as Track calls.
   */
  function logEachEvent(jobId: string | undefined, events: readonly QueuedEvent[], msg: string) {
    if (!log.isLevelEnabled('debug')) return;
    for (const e of events) log.debug({ queue: EVENTS_QUEUE, jobId, environmentId: e.environmentId, messageId: e.messageId }, msg);
  }

  /** Refused events are dead-lettered before their batch completes (a failure here fails the batch, which runs again). */
  async function toDeadLetters(jobId: string | undefined, refused: Refused[]) {
    if (!refused.length) return;
    await deadLettered.add(refused);
    counted.failed.inc(refused.length);
    for (const { event, error } of refused) {
      log.error(
        { queue: EVENTS_QUEUE, jobId, environmentId: event.environmentId, messageId: event.messageId, err: error },
        'event refused by PostgreSQL for its data: recorded failed and sent to the dead-letter queue',
      );
    }
  }

  /** One worker per partition of the events queue; together they take the configured concurrency. */
  const perPartition = Math.ceil(config.workerConcurrency / eventsQueues.length);
  const processBatch = async (job: Job<EventBatchJob>) => {
    const started = performance.now();
    const list = job.data?.events;
    if (!Array.isArray(list)) throw new UnrecoverableError('not a batch of events');
    const refused = await persist(list);
    await toDeadLetters(job.id, refused);
    const now = Date.now();
    let oldest = now;
    // Received to stored: refused events went to the dead-letter queue instead.
    const notStored = refused.length ? new Set(refused.map((r) => r.event)) : null;
    for (const e of list) {
      if (!notStored?.has(e)) metrics.storedLag.observe((now - e.receivedAt) / 1000);
      if (e.receivedAt < oldest) oldest = e.receivedAt;
    }
    counted.stored.inc(list.length - refused.length);
    counted.completed.inc();
    metrics.batchEvents.observe(list.length);
    log.info(
      {
        queue: EVENTS_QUEUE,
        jobId: job.id,
        events: list.length,
        refused: refused.length,
        attempt: job.attemptsMade + 1,
        ms: Math.round(performance.now() - started),
        lagMs: now - oldest,
      },
      'event batch persisted',
    );
    const refusedEvents = new Set(refused.map((r) => r.event));
    logEachEvent(
      job.id,
      list.filter((e) => !refusedEvents.has(e)),
      'event persisted',
    );
  };
  const eventWorkers = eventsQueues.map((queue) => {
    const worker = new BackoffWorker<EventBatchJob>(queue.name, processBatch, {
      connection,
      prefix: config.queuePrefix,
      concurrency: perPartition,
      // A killed worker's jobs return to the queue after the lock lapses; a kill is not a
      // reason to fail an event, so allow several stalls before BullMQ gives up on a job.
      lockDuration: config.workerLockMs,
      stalledInterval: Math.max(1000, Math.floor(config.workerLockMs / 2)),
      maxStalledCount: 10,
    });
    worker.on('error', warnOn('events worker'));
    worker.on('failed', (job, err) => void onFailed(job, err));
    return worker;
  });

  /**
   * A failed attempt is retried with backoff. After the last one, never silently: every event of
   * the batch is counted and logged as failed, recorded with status `failed` where PostgreSQL
   * answers, and sent to the dead-letter queue; the batch job itself stays in Redis too.
   */
  async function onFailed(job: Job<EventBatchJob> | undefined, err: Error) {
    if (!job) return;
    const list = Array.isArray(job.data?.events) ? job.data.events : [];
    const final = job.attemptsMade >= (job.opts.attempts ?? 1) || err.name === 'UnrecoverableError';
    metrics.batches.inc({ outcome: final ? 'failed' : 'retried' });
    if (!final) {
      counted.retried.inc(list.length);
      log.warn({ queue: EVENTS_QUEUE, jobId: job.id, events: list.length, attempt: job.attemptsMade, err: err.message }, 'event batch failed; retrying');
      logEachEvent(job.id, list, 'event in a failed batch; retrying');
      return;
    }
    counted.failed.inc(list.length);
    log.error(
      { queue: EVENTS_QUEUE, jobId: job.id, events: list.length, attempt: job.attemptsMade, err: err.message },
      'event batch failed for good: its events go to the dead-letter queue',
    );
    // Each event failed: one line each, so a grep for a messageId finds why.
    for (const e of list) {
      log.error(
        { queue: EVENTS_QUEUE, jobId: job.id, environmentId: e.environmentId, messageId: e.messageId, err: err.message },
        'event failed for good (its batch ran out of attempts): recorded failed and sent to the dead-letter queue',
      );
    }
    const error = dbErrorMessage(err);
    if (!(await recordBatchFailed(db, list, error, time))) log.error({ jobId: job.id }, 'could not record the failed events in PostgreSQL');
    await deadLettered
      .add(list.map((event) => ({ event, error })))
      .catch((e: Error) => log.error({ jobId: job.id, err: e.message }, 'could not dead-letter the failed batch; it stays failed in the events queue'));
  }

  // Service events relayed from the outbox: profile changes can start attribute-triggered
  // journeys; consent changes are read when a send step runs, so they need nothing here.
  const serviceEvents = new BackoffWorker<ServiceEventJob>(
    relayQueue.name,
    async (job) => {
      const started = performance.now();
      if (job.data.kind === SERVICE_EVENTS.profileFieldsChanged) await journeys.handleProfileChange(job.data);
      log.info({ queue: SERVICE_EVENTS_QUEUE, jobId: job.id, kind: job.data.kind, ms: Math.round(performance.now() - started) }, 'service event handled');
    },
    { connection, prefix: config.queuePrefix, concurrency: config.workerConcurrency, lockDuration: config.workerLockMs },
  );
  serviceEvents.on('error', warnOn('service-events worker'));
  const relay = startOutboxRelay({ config, db, queue: relayQueue, memory, log });
  const timers = startJourneyTimers({ engine: journeys, tickMs: config.journeyTickMs, log });
  const storage = startStorageMaintenance({
    pool: poolOf(db),
    config,
    log,
    onFigures: (figures) => metrics.storage.set(figures),
    onRound: (outcome) => metrics.storage.rounds.inc({ outcome }),
    clock,
  });

  const ready = () => readiness({ db, redis: connection, memory });
  const metricsServer = await serveWorkerMetrics(metrics.registry, { port: config.workerMetricsPort, host: config.host, log, ready });
  await Promise.all([...eventWorkers.map((w) => w.waitUntilReady()), deadLettered.waitUntilReady(), serviceEvents.waitUntilReady()]).catch(() => {});
  log.info({ concurrency: config.workerConcurrency, metricsPort: metricsServer.port }, 'worker started');
  if (config.journeyGraceMs < config.enqueueTimeoutMs) {
    log.warn(
      { journeyGraceMs: config.journeyGraceMs, enqueueTimeoutMs: config.enqueueTimeoutMs },
      'JOURNEY_GRACE_MS is below ENQUEUE_TIMEOUT_MS: a journey may move on before an event answered 202 reaches the queue',
    );
  }
  return {
    metricsPort: metricsServer.port,
    async close() {
      await relay.close();
      await Promise.all([...eventWorkers.map((w) => w.close()), deadLettered.close(), serviceEvents.close(), timers.close(), storage.close()]);
      await Promise.all([closeQueues([relayQueue, ...eventsQueues, deadLetters], connection), metricsServer.close()]);
      await guardPool.end();
      clock.close();
      memory.close();
      warnings.close();
      log.info('worker stopped');
    },
  };
}
