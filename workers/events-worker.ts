// The events queue's workers, one per partition: each job is one gateway's batch of Track
// events, stored through persist-event.ts. Events PostgreSQL refuses for their data go to the
// dead-letter queue before their batch completes; a batch that runs out of attempts has every
// event recorded failed and dead-lettered, never dropped silently.
import { UnrecoverableError, type Job, type Queue } from 'bullmq';
import type { Config } from '../platform/config.ts';
import { dbErrorMessage, type Db } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import { EVENTS_QUEUE } from '../platform/queues.ts';
import { type EventBatchJob, type QueuedEvent } from '../events/jobs.ts';
import type { Redis } from '../platform/redis.ts';
import { BackoffWorker } from './backoff-worker.ts';
import type { DeadLetters } from './dead-letter.ts';
import type { WorkerMetrics } from './metrics.ts';
import { recordBatchFailed, type Refused, type StoreTime } from './persist-event.ts';

export interface EventWorkersDeps {
  config: Pick<Config, 'queuePrefix' | 'workerConcurrency' | 'workerLockMs'>;
  db: Db;
  log: Logger;
  connection: Redis;
  /** Every partition of the events queue. */
  queues: Queue<EventBatchJob>[];
  /** The worker's store (persist-event.ts createEventPersister): resolves with the events refused for their data. */
  persist: (events: readonly QueuedEvent[]) => Promise<Refused[]>;
  deadLettered: DeadLetters;
  metrics: WorkerMetrics;
  /** The outcome counters, labelled once. */
  counted: Record<'stored' | 'failed' | 'retried' | 'completed', { inc(n?: number): void }>;
  time: StoreTime;
  /** An 'error' listener for a worker, throttled by the caller. */
  warnOn: (what: string) => (err: Error) => void;
}

export function startEventWorkers(deps: EventWorkersDeps): BackoffWorker<EventBatchJob>[] {
  const { config, db, log, connection, queues, persist, deadLettered, metrics, counted, time, warnOn } = deps;

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
  const perPartition = Math.ceil(config.workerConcurrency / queues.length);
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
  const workers = queues.map((queue) => {
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
  return workers;
}
