// The events room's queues and the contract of each one's jobs: Track's batches (written by
// gateway/event-batcher.ts, read by workers/events-worker.ts), the dead letters (workers/dead-letter.ts)
// and the service events (relayed from the outbox by workers/outbox-relay.ts, read by the journey
// engine). The queues' names, job options and Redis keys are platform/queues.ts's.
import { Queue } from 'bullmq';
import type { Config } from '../platform/config.ts';
import type { Redis } from '../platform/redis.ts';
import { DEAD_LETTER_QUEUE, eventJobOptions, eventsQueueNames, queueName, SERVICE_EVENTS_QUEUE } from '../platform/queues.ts';

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

/**
 * Contract of a job on the dead-letter queue (written by workers/events-worker.ts when PostgreSQL
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
