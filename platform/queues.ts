import { Queue, type JobsOptions } from 'bullmq';
import type { Config } from './config.ts';
import type { Redis } from './redis.ts';

// Names that need no BullMQ live in queue-keys.ts (operator commands import them without
// loading BullMQ); exported here too for everything that works with the queues.
export { authCacheChannels, eventsQueueNames, jobIdFor, queueName } from './queue-keys.ts';
import { eventsQueueNames, queueName } from './queue-keys.ts';

export const EVENTS_QUEUE = 'events';

/**
 * One accepted Track event, as the gateway wrote it into a batch job (read by
 * workers/persist-event.ts):
 * - `payload` is the accepted event serialized once by the gateway; it travels as a string
 *   inside the job's JSON, which is why quotes count twice in the size measure;
 * - `receivedAt` is the gateway's acceptance time (epoch ms), `timestampMs` the caller's
 *   `timestamp` parsed.
 */
export interface QueuedEvent {
  environmentId: string;
  messageId: string;
  receivedAt: number;
  timestampMs: number;
  payload: string;
}

/**
 * Contract of a job on the events queue: the events of one gateway group commit, in arrival
 * order. There is no per-event job id: a messageId's row in event_ids makes a repeat (inside a
 * batch, across batches, across gateways, across day partitions) one event. The job's `timestamp` is the oldest
 * `receivedAt` of its events (what the journey watermark waits for).
 */
export interface EventBatchJob {
  events: QueuedEvent[];
}

/** A batch job's name, as the dashboard lists it: how many events it carries. */
export function eventBatchName(size: number): string {
  return `track (${size} event${size === 1 ? '' : 's'})`;
}

export const DEAD_LETTER_QUEUE = 'events-dead-letter';

/**
 * Contract of a job on the dead-letter queue (written by workers/main.ts when PostgreSQL
 * refused an event for its data, or its batch ran out of attempts; kept failed until an
 * operator retries it from the dashboard or with `intake events retry`, which runs the event
 * through the worker's store again). Its jobId is `jobIdFor` the event, so one event has at
 * most one dead-letter job.
 */
export interface DeadLetterJob {
  event: QueuedEvent;
  /** Why it was refused; the job's first run fails with it. Null: made by an operator, to be tried at once. */
  error: string | null;
}

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

type EventsQueueConfig = Pick<Config, 'queuePrefix' | 'jobAttempts' | 'jobBackoffMs' | 'redisClusterNodes' | 'queuePartitions'>;

/** Every partition of the events queue (QUEUE_PARTITIONS; one, named `events`, by default), in partition order. */
export function createEventsQueues(config: EventsQueueConfig, connection: Redis): Queue<EventBatchJob>[] {
  return eventsQueueNames(config).map((name) => createEventsQueueNamed(name, config, connection));
}

/** The events queue's first partition: the whole queue with QUEUE_PARTITIONS=1. */
export function createEventsQueue(config: EventsQueueConfig, connection: Redis): Queue<EventBatchJob> {
  return createEventsQueueNamed(eventsQueueNames(config)[0], config, connection);
}

function createEventsQueueNamed(name: string, config: EventsQueueConfig, connection: Redis): Queue<EventBatchJob> {
  return new Queue<EventBatchJob>(name, {
    connection,
    prefix: config.queuePrefix,
    // A completed batch job is gone at once: its events are in PostgreSQL, and up to
    // TRACK_BATCH_BYTES of them would hold Redis memory for nothing (the worker's batch
    // counters and log lines say what completed). A failed one keeps its events.
    defaultJobOptions: eventJobOptions(config, true),
  });
}

/** One attempt per run: a dead-letter job stays failed until an operator retries it. */
export function createDeadLetterQueue(config: Pick<Config, 'queuePrefix' | 'redisClusterNodes'>, connection: Redis): Queue<DeadLetterJob> {
  return new Queue<DeadLetterJob>(queueName(DEAD_LETTER_QUEUE, config), {
    connection,
    prefix: config.queuePrefix,
    defaultJobOptions: { attempts: 1, removeOnComplete: { age: 7 * 86_400 }, removeOnFail: false },
  });
}

export const SERVICE_EVENTS_QUEUE = 'service-events';

/**
 * Contract of a job on the service-events queue (written by workers/outbox-relay.ts from the
 * outbox, read by the journey engine): `kind` is `profile_fields_changed` or
 * `subscription_changed`, `payload` the outbox row's JSON, `outboxId` its id (also the jobId,
 * so relaying a row twice adds one job).
 */
export interface ServiceEventJob {
  outboxId: string;
  environmentId: string;
  kind: string;
  createdAt: number;
  payload: string;
}

export function createServiceEventsQueue(
  config: Pick<Config, 'queuePrefix' | 'jobAttempts' | 'jobBackoffMs' | 'redisClusterNodes'>,
  connection: Redis,
): Queue<ServiceEventJob> {
  return new Queue<ServiceEventJob>(queueName(SERVICE_EVENTS_QUEUE, config), {
    connection,
    prefix: config.queuePrefix,
    // Completed jobs stay (an hour at most): their ids, `o<outboxId>`, are what makes a row
    // relayed twice one job.
    defaultJobOptions: eventJobOptions(config),
  });
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
