// The dead-letter queue: one job per event PostgreSQL refused for its data (or whose batch ran
// out of attempts), kept failed with the refusal as its reason until an operator retries it
// from the dashboard or with `intake events retry`; a retried job runs its event through the
// worker's store again. BullMQ cannot add a job as failed, so a job's first run parks it.
import { UnrecoverableError, type Queue } from 'bullmq';
import type { Config } from '../platform/config.ts';
import type { Logger } from '../platform/logger.ts';
import { DEAD_LETTER_QUEUE, jobIdFor } from '../platform/queues.ts';
import { type DeadLetterJob, type QueuedEvent } from '../events/jobs.ts';
import type { Redis } from '../platform/redis.ts';
import { withTimeout } from '../platform/with-timeout.ts';
import { BackoffWorker } from './backoff-worker.ts';
import type { Refused } from './persist-event.ts';

export interface DeadLetters {
  /** Adds one job per event (its id is the event's, so adding it again changes nothing); rejects past the enqueue bound. */
  add(refused: Refused[]): Promise<void>;
  waitUntilReady(): Promise<unknown>;
  close(): Promise<void>;
}

export function startDeadLetters(deps: {
  config: Pick<Config, 'queuePrefix' | 'enqueueTimeoutMs' | 'workerLockMs'>;
  connection: Redis;
  queue: Queue<DeadLetterJob>;
  /** The events worker's store: resolves with the events refused again. */
  persist: (events: readonly QueuedEvent[]) => Promise<Refused[]>;
  onStored: () => void;
  /** The worker's 'error' events (the caller throttles them). */
  onError: (err: Error) => void;
  log: Logger;
}): DeadLetters {
  const { config, queue, persist, log } = deps;
  const worker = new BackoffWorker<DeadLetterJob>(
    // The queue's name as made (hash-tagged on a Redis Cluster).
    queue.name,
    async (job) => {
      if (job.attemptsMade === 0 && job.data.error !== null) throw new UnrecoverableError(job.data.error);
      const [refused] = await persist([job.data.event]);
      if (refused) throw new UnrecoverableError(refused.error);
      deps.onStored();
      const { environmentId, messageId } = job.data.event;
      log.info({ queue: DEAD_LETTER_QUEUE, jobId: job.id, environmentId, messageId }, 'dead-lettered event stored on retry');
    },
    { connection: deps.connection, prefix: config.queuePrefix, concurrency: 4, lockDuration: config.workerLockMs },
  );
  worker.on('error', deps.onError);
  worker.on('failed', (job, err) => {
    // A job's first failure with a recorded error is it parking itself (that refusal was logged
    // when the event was dead-lettered); any other failure is a retry refused again.
    if (!job || (job.attemptsMade <= 1 && job.data.error !== null)) return;
    const { environmentId, messageId } = job.data.event;
    log.error({ queue: DEAD_LETTER_QUEUE, jobId: job.id, environmentId, messageId, err: err.message }, 'dead-lettered event refused again on retry');
  });

  return {
    async add(refused) {
      if (!refused.length) return;
      const jobs = refused.map(({ event, error }) => ({
        name: 'track',
        data: { event, error },
        opts: { jobId: jobIdFor(event.environmentId, event.messageId) },
      }));
      await withTimeout(queue.addBulk(jobs), config.enqueueTimeoutMs, 'dead-letter queue unavailable');
    },
    waitUntilReady: () => worker.waitUntilReady(),
    close: () => worker.close(),
  };
}
