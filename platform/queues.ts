// What every queue shares, whatever its jobs: the queues' names, the events jobs' options, closing
// queues and counting a partitioned queue as one. Each queue with its job contract is its room's
// (events/jobs.ts).
import type { JobsOptions, Queue } from 'bullmq';
import type { Config } from './config.ts';
import type { Redis } from './redis.ts';

// Names that need no BullMQ live in queue-keys.ts (operator commands import them without
// loading BullMQ); exported here too for everything that works with the queues.
export { authCacheChannels, eventsQueueNames, jobIdFor, queueName } from './queue-keys.ts';

export const EVENTS_QUEUE = 'events';
export const DEAD_LETTER_QUEUE = 'events-dead-letter';
export const SERVICE_EVENTS_QUEUE = 'service-events';

/** `keepCompleted`: completed jobs kept (an hour at most), or `true` to remove each as it completes. */
export function eventJobOptions(config: Pick<Config, 'jobAttempts' | 'jobBackoffMs'>, keepCompleted: number | true = 50_000): JobsOptions {
  return {
    attempts: config.jobAttempts,
    backoff: { type: 'exponential', delay: config.jobBackoffMs },
    removeOnComplete: keepCompleted === true ? true : { age: 3600, count: keepCompleted },
    // Failed jobs stay for inspection (dashboard, `intake events get`).
    removeOnFail: false,
  };
}

/**
 * Close queues that share `connection`, and the connection. Closing a queue whose connection
 * setup is still in flight strips its listeners, and BullMQ then reports the failed setup as an
 * 'error' nobody hears, which ends the process. So the connection goes first, each queue's setup
 * settles (a failure is expected now, and ignored), and only then are the queues closed.
 */
export async function closeQueues(queues: Queue[], connection: Redis): Promise<void> {
  for (const queue of queues) queue.on('error', () => {});
  connection.disconnect();
  await Promise.all(queues.map((queue) => queue.waitUntilReady().catch(() => {})));
  await Promise.all(queues.map((queue) => queue.close().catch(() => {})));
}

/**
 * The events queue's job counts over all its partitions: metrics report the events queue as one
 * (`intake_queue_jobs{queue="events"}`), however many partitions it has.
 */
export function allPartitions(partitions: Pick<Queue, 'getJobCounts'>[]): Pick<Queue, 'getJobCounts'> {
  return {
    async getJobCounts(...types: Parameters<Queue['getJobCounts']>) {
      const counts = await Promise.all(partitions.map((queue) => queue.getJobCounts(...types)));
      const total: Record<string, number> = {};
      for (const count of counts) for (const [state, n] of Object.entries(count)) total[state] = (total[state] ?? 0) + n;
      return total;
    },
  };
}
