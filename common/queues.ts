import { hash } from 'node:crypto';
import { toPgText } from './domain/pg-text.ts';
import { Queue, type JobsOptions } from 'bullmq';
import type { Config } from './config.ts';
import type { Redis } from './redis.ts';

export const EVENTS_QUEUE = 'events';

/**
 * Contract of a job on the events queue (written by gateway/handlers/track.ts, read by
 * workers/persist-event.ts):
 * - `payload` is the accepted Track event serialized once by the gateway; it travels as a
 *   string inside the job's JSON, which is why quotes count twice in the size measure;
 * - `receivedAt` is the gateway's acceptance time (epoch ms), `timestampMs` the caller's
 *   `timestamp` parsed.
 */
export interface EventJob {
  environmentId: string;
  messageId: string;
  receivedAt: number;
  timestampMs: number;
  payload: string;
}

/**
 * BullMQ rejects custom ids containing ':' and messageIds are free text, so the id is a
 * hash. It only dedupes jobs still in Redis; the events table's unique key is the guarantee.
 */
export function jobIdFor(environmentId: string, messageId: string): string {
  // One-shot hash: a third of createHash()'s cost, on Track's hot path. The escaped form is
  // well-formed UTF-16, so two IDs differing only in an unpaired surrogate do not collide.
  return 'e' + hash('sha256', `${environmentId}\0${toPgText(messageId)}`, 'base64url').slice(0, 32);
}

export function eventJobOptions(config: Pick<Config, 'jobAttempts' | 'jobBackoffMs'>): JobsOptions {
  return {
    attempts: config.jobAttempts,
    backoff: { type: 'exponential', delay: config.jobBackoffMs },
    removeOnComplete: { age: 3600, count: 50_000 },
    // Failed jobs stay for inspection (dashboard, `intake events get`).
    removeOnFail: false,
  };
}

export function createEventsQueue(config: Pick<Config, 'queuePrefix' | 'jobAttempts' | 'jobBackoffMs'>, connection: Redis): Queue<EventJob> {
  return new Queue<EventJob>(EVENTS_QUEUE, {
    connection,
    prefix: config.queuePrefix,
    defaultJobOptions: eventJobOptions(config),
  });
}

/** Redis channels on which operator commands tell every gateway to drop cached key lookups, and gateways confirm. */
export function authCacheChannels(config: Pick<Config, 'queuePrefix'>): { invalidate: string; ack: string } {
  return { invalidate: `${config.queuePrefix}:auth-cache:invalidate`, ack: `${config.queuePrefix}:auth-cache:ack` };
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

export function createServiceEventsQueue(config: Pick<Config, 'queuePrefix' | 'jobAttempts' | 'jobBackoffMs'>, connection: Redis): Queue<ServiceEventJob> {
  return new Queue<ServiceEventJob>(SERVICE_EVENTS_QUEUE, {
    connection,
    prefix: config.queuePrefix,
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
