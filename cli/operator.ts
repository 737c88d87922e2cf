import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import { authCacheChannels } from '../common/queue-keys.ts';
import type { DeadLetterJob, EventBatchJob } from '../common/queues.ts';
import type { Redis } from '../common/redis.ts';
import { TimeoutError, withTimeout } from '../common/with-timeout.ts';

/** What operator commands work with; built once in cli/intake.ts. */
export interface OperatorDeps {
  config: Config;
  db: Db;
  /** Tell every gateway to drop its cached key lookups (revocation, removal). */
  invalidateAuthCaches(): Promise<void>;
  eventsQueue(): Queue<EventBatchJob>;
  deadLetterQueue(): Queue<DeadLetterJob>;
}

export class OperatorError extends Error {}

/** The environment an operator command acts on: Production unless `--env` names another. */
export async function findEnvironment(db: Db, orgSlug: string, pathValue: string | undefined) {
  const org = await db.organization.findUnique({ where: { slug: orgSlug } });
  if (!org) throw new OperatorError(`organization ${orgSlug} does not exist`);
  const env = await db.environment.findFirst({
    where: pathValue === undefined ? { organizationId: org.id, isProduction: true } : { organizationId: org.id, pathValue },
  });
  if (!env) throw new OperatorError(`environment ${pathValue} does not exist in ${orgSlug}`);
  return { org, env };
}

/** The same for commands that add to an environment (keys, journeys): a removed one takes nothing new; its history stays readable. */
export async function findLiveEnvironment(db: Db, orgSlug: string, pathValue: string | undefined) {
  const found = await findEnvironment(db, orgSlug, pathValue);
  if (found.env.removedAt) throw new OperatorError(`environment ${found.env.pathValue} is removed`);
  return found;
}

type RedisModule = typeof import('../common/redis.ts');
/** What operator commands that read the queues need: BullMQ's queues and Redis connections. */
export type QueueModules = typeof import('../common/queues.ts') & RedisModule;

/**
 * BullMQ takes about 0.3 s to load, ioredis about 0.1 s, and most commands read PostgreSQL
 * only: they are imported by the commands that use them.
 */
export async function loadQueueModules(): Promise<QueueModules> {
  const [queues, redis] = await Promise.all([import('../common/queues.ts'), import('../common/redis.ts')]);
  return { ...queues, ...redis };
}

/**
 * Clients for operator commands, opened lazily (most commands need only PostgreSQL). The queues
 * are there when `queues` is given; a cache invalidation loads the Redis client itself.
 */
export function openOperator(config: Config, db: Db, queues?: QueueModules): OperatorDeps & { close(): Promise<void> } {
  let redisModule: RedisModule | undefined = queues;
  let redis: Redis | undefined;
  let queue: Queue<EventBatchJob> | undefined;
  let deadLetters: Queue<DeadLetterJob> | undefined;
  const withQueues = () => {
    if (!queues) throw new Error('operator opened without its queue modules (openOperator(config, db, await loadQueueModules()))');
    return queues;
  };
  const connect = () => (redis ??= (redisModule ?? withQueues()).createRedis(config, 'worker'));
  return {
    config,
    db,
    async invalidateAuthCaches() {
      redisModule ??= await import('../common/redis.ts');
      const problem = await invalidateEverywhere(connect(), authCacheChannels(config), ACK_TIMEOUT_MS);
      if (problem) console.error(`warning: ${problem}; gateways that missed it read keys through to PostgreSQL until they reconnect`);
    },
    eventsQueue: () => (queue ??= withQueues().createEventsQueue(config, connect())),
    deadLetterQueue: () => (deadLetters ??= withQueues().createDeadLetterQueue(config, connect())),
    async close() {
      const opened = [queue, deadLetters].filter((q) => q !== undefined) as Queue[];
      if (opened.length) await withQueues().closeQueues(opened, redis!);
      else redis?.disconnect();
      await db.$disconnect();
    },
  };
}

const ACK_TIMEOUT_MS = 3000;

/**
 * Publishes an invalidation and waits until every gateway that received it has dropped its
 * cache (each acks the nonce). Returns a problem description, or null when all acked.
 */
export async function invalidateEverywhere(redis: Redis, channels: { invalidate: string; ack: string }, timeoutMs: number): Promise<string | null> {
  const nonce = randomUUID();
  const listener = redis.duplicate();
  listener.on('error', () => {});
  let acked = 0;
  let expected = Infinity;
  let done: () => void = () => {};
  const allAcked = new Promise<void>((resolve) => (done = resolve));
  listener.on('message', (_channel: string, message: string) => {
    if (message === nonce && ++acked >= expected) done();
  });
  const publishAndWait = async () => {
    await listener.subscribe(channels.ack);
    expected = await redis.publish(channels.invalidate, nonce);
    if (acked < expected) await allAcked;
  };
  try {
    await withTimeout(publishAndWait(), timeoutMs, 'invalidation not confirmed');
    return null;
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    return expected === Infinity ? 'Redis unreachable' : `${expected - acked} of ${expected} gateways did not confirm the cache invalidation`;
  } finally {
    listener.disconnect();
  }
}
