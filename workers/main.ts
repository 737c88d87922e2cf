import type { Config } from '../platform/config.ts';
import { createLockPool, poolOf, type Db } from '../platform/db.ts';
import { createTrustedClock } from '../platform/trusted-clock.ts';
import type { Logger } from '../platform/logger.ts';
import { DEAD_LETTER_QUEUE, EVENTS_QUEUE, SERVICE_EVENTS_QUEUE, allPartitions, closeQueues } from '../platform/queues.ts';
import { createDeadLetterQueue, createEventsQueues, createServiceEventsQueue, type ServiceEventJob } from '../events/jobs.ts';
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
import { createEventPersister } from './persist-event.ts';
import { startEventWorkers } from './events-worker.ts';
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

  const eventWorkers = startEventWorkers({ config, db, log, connection, queues: eventsQueues, persist, deadLettered, metrics, counted, time, warnOn });

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
