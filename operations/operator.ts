import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { Config } from '../platform/config.ts';
import type { Db } from '../platform/db.ts';
import { authCacheChannels, liveFlushChannels, suppressionChannels } from '../platform/queue-keys.ts';
import type { DeadLetterJob, EventBatchJob, ServiceEventJob } from '../events/jobs.ts';
import type { Cluster, Redis } from '../platform/redis.ts';
import { TimeoutError, withTimeout } from '../platform/with-timeout.ts';

/** What operator commands work with; built once in cli/intake.ts. */
export interface OperatorDeps {
  config: Config;
  db: Db;
  /**
   * Tells every gateway to drop its cached key lookups after `change` (a revocation, a
   * removal), and waits until each has; throws an OperatorError saying what was done and what
   * to do when that cannot be confirmed in time.
   */
  invalidateAuthCaches(change: CachedChange): Promise<void>;
  /** The same for the gateways' sets of suppressed user IDs (gateway/suppressions.ts). */
  invalidateSuppressions(change: CachedChange): Promise<void>;
  /**
   * Asks every gateway to write what its live view recorders hold (gateway/live/flush-on-erasure.ts)
   * and waits until each has; returns what went wrong, or null.
   */
  flushLiveViews(): Promise<string | null>;
  /** Every partition of the events queue (QUEUE_PARTITIONS), in partition order. */
  eventsQueues(): Queue<EventBatchJob>[];
  /** The first partition: the whole events queue with QUEUE_PARTITIONS=1. */
  eventsQueue(): Queue<EventBatchJob>;
  deadLetterQueue(): Queue<DeadLetterJob>;
  serviceEventsQueue(): Queue<ServiceEventJob>;
  /** A Redis connection (opened on first use). */
  redis(): Promise<Redis>;
  /** Where a command that streams its document writes it (stdout when absent). */
  out?: NodeJS.WritableStream;
  /** Where a command that reads a secret (`operator add --password-stdin`) reads it (stdin when absent). */
  in?: NodeJS.ReadableStream;
}

/** Returned by a command that wrote its document itself (streamed): nothing more to print. */
export const STREAMED = Symbol('streamed');

export class OperatorError extends Error {}

/** What the command names does not exist (an organization, an environment, a key, an operator): the admin API answers 404. */
export class MissingError extends OperatorError {}

/** What a command changed in the database, and what a gateway that did not hear of it may still do. */
export interface CachedChange {
  /** e.g. `key abcde revoked` */
  done: string;
  /** e.g. `accept the key` */
  stale: string;
}

/**
 * The one line for a change made but not confirmed by every gateway. Running the command again
 * is safe (each of them is idempotent) and notifies them once Redis and the gateways answer.
 */
export function notNotified(change: CachedChange, problem: string, config: Pick<Config, 'keyCacheTtlMs'>): string {
  const ttl = `${Math.ceil(config.keyCacheTtlMs / 1000)} s`;
  return (
    `${change.done} in the database, but the gateways were not notified (${problem}): one that cached it may still ${change.stale} ` +
    `for up to ${ttl} (KEY_CACHE_TTL_MS; while it cannot reach PostgreSQL, up to KEY_CACHE_STALE_MAX_MS); run the command again to notify them`
  );
}

/** The environment an operator command acts on: Production unless `--env` names another. */
export async function findEnvironment(db: Db, orgSlug: string, pathValue: string | undefined) {
  const org = await db.organization.findUnique({ where: { slug: orgSlug } });
  if (!org) throw new MissingError(`organization ${orgSlug} does not exist`);
  const env = await db.environment.findFirst({
    where: pathValue === undefined ? { organizationId: org.id, isProduction: true } : { organizationId: org.id, pathValue },
  });
  if (!env) throw new MissingError(`environment ${pathValue} does not exist in ${orgSlug}`);
  return { org, env };
}

/** The same for commands that add to an environment (keys, journeys): a removed one takes nothing new; its history stays readable. */
export async function findLiveEnvironment(db: Db, orgSlug: string, pathValue: string | undefined) {
  const found = await findEnvironment(db, orgSlug, pathValue);
  if (found.env.removedAt) throw new OperatorError(`environment ${found.env.pathValue} is removed`);
  return found;
}

type RedisModule = typeof import('../platform/redis.ts');
/** What operator commands that read the queues need: BullMQ's queues and Redis connections. */
export type QueueModules = typeof import('../platform/queues.ts') & typeof import('../events/jobs.ts') & RedisModule;

/**
 * BullMQ takes about 0.3 s to load, ioredis about 0.1 s, and most commands read PostgreSQL
 * only: they are imported by the commands that use them.
 */
export async function loadQueueModules(): Promise<QueueModules> {
  const [queues, jobs, redis] = await Promise.all([import('../platform/queues.ts'), import('../events/jobs.ts'), import('../platform/redis.ts')]);
  return { ...queues, ...jobs, ...redis };
}

/**
 * Clients for operator commands, opened lazily (most commands need only PostgreSQL). The queues
 * are there when `queues` is given; a cache invalidation loads the Redis client itself.
 */
export function openOperator(config: Config, db: Db, queues?: QueueModules): OperatorDeps & { close(keepDb?: boolean): Promise<void> } {
  let redisModule: RedisModule | undefined = queues;
  let redis: Redis | undefined;
  let partitions: Queue<EventBatchJob>[] | undefined;
  let deadLetters: Queue<DeadLetterJob> | undefined;
  let serviceEvents: Queue<ServiceEventJob> | undefined;
  const withQueues = () => {
    if (!queues) throw new Error('operator opened without its queue modules (openOperator(config, db, await loadQueueModules()))');
    return queues;
  };
  const eventsQueues = () => (partitions ??= withQueues().createEventsQueues(config, connect()));
  const connect = () => (redis ??= (redisModule ?? withQueues()).createRedis(config, 'worker'));
  return {
    config,
    db,
    async invalidateAuthCaches(change) {
      redisModule ??= await import('../platform/redis.ts');
      const problem = await invalidateEverywhere(connect(), authCacheChannels(config), ACK_TIMEOUT_MS);
      if (problem) throw new OperatorError(notNotified(change, problem, config));
    },
    async invalidateSuppressions(change) {
      redisModule ??= await import('../platform/redis.ts');
      const problem = await invalidateEverywhere(connect(), suppressionChannels(config), ACK_TIMEOUT_MS);
      if (problem) {
        const within = `${Math.ceil(config.suppressionRefreshMs / 1000)} s`;
        throw new OperatorError(
          `${change.done} in the database, but the gateways were not notified (${problem}): one that has not heard may still ${change.stale} ` +
            `for up to ${within} (SUPPRESSION_REFRESH_MS); workers and Identify check the database, so nothing received since is stored; run the command again to notify them`,
        );
      }
    },
    async flushLiveViews() {
      redisModule ??= await import('../platform/redis.ts');
      return invalidateEverywhere(connect(), liveFlushChannels(config), LIVE_FLUSH_TIMEOUT_MS);
    },
    async redis() {
      redisModule ??= await import('../platform/redis.ts');
      return connect();
    },
    eventsQueues,
    eventsQueue: () => eventsQueues()[0],
    deadLetterQueue: () => (deadLetters ??= withQueues().createDeadLetterQueue(config, connect())),
    serviceEventsQueue: () => (serviceEvents ??= withQueues().createServiceEventsQueue(config, connect())),
    /** `keepDb`: the database client is someone else's (the dashboard's), left open. */
    async close(keepDb = false) {
      const opened = [...(partitions ?? []), deadLetters, serviceEvents].filter((q) => q !== undefined) as Queue[];
      if (opened.length) await withQueues().closeQueues(opened, redis!);
      else redis?.disconnect();
      if (!keepDb) await db.$disconnect();
    },
  };
}

/**
 * How long a command waits for Redis and for every gateway's ack: ioredis reconnects meanwhile,
 * and a gateway busy starting or under load may take seconds to read the message.
 */
const ACK_TIMEOUT_MS = 10_000;
/** A gateway writes its live view in milliseconds; an erasure does not wait long on one that cannot (its answer says so). */
const LIVE_FLUSH_TIMEOUT_MS = 3000;
/** An invalidation not confirmed by all within this is published again (see below). */
const ROUND_MS = 2000;

/**
 * Publishes `message` and says how many subscribers it reached. One Redis counts them in its
 * answer; on a cluster a message reaches every node but each counts only its own clients, so the
 * count is every node's PUBSUB NUMSUB (a subscriber that came between the two is counted without
 * having heard it: its round goes unconfirmed and is published again).
 */
async function publishCounted(redis: Redis, channel: string, message: string): Promise<number> {
  const reached = await redis.publish(channel, message);
  if (!redis.isCluster) return reached;
  const counts = await Promise.all((redis as Cluster).nodes('all').map((node) => node.pubsub('NUMSUB', channel) as Promise<[string, number]>));
  return counts.reduce((sum, [, n]) => sum + Number(n), 0);
}

/**
 * Publishes an invalidation and waits until every gateway that received it has dropped its
 * cache (each acks the nonce). Returns a problem description, or null when all acked.
 *
 * Redis counts the subscribers a message reached; a gateway that stops between receiving it
 * and acking (a restart, a scale-down) would never ack. So a round that is not confirmed within
 * ROUND_MS is published again with a new nonce: one round that every receiver confirms is
 * enough (each dropped its cache after the change committed), and a gateway gone is no longer
 * counted. A gateway that receives but never acks fails every round until `timeoutMs`.
 */
export async function invalidateEverywhere(
  redis: Redis,
  channels: { invalidate: string; ack: string },
  timeoutMs: number,
  roundMs = ROUND_MS,
): Promise<string | null> {
  const listener = redis.duplicate();
  listener.on('error', () => {});
  const acks = new Map<string, number>();
  let heard: () => void = () => {};
  listener.on('message', (_channel: string, nonce: string) => {
    acks.set(nonce, (acks.get(nonce) ?? 0) + 1);
    heard();
  });
  let last: { expected: number; acked: number } | undefined;
  let over = false;
  const round = async (): Promise<boolean> => {
    const nonce = randomUUID();
    const expected = await publishCounted(redis, channels.invalidate, nonce);
    const until = Date.now() + roundMs;
    while ((acks.get(nonce) ?? 0) < expected && Date.now() < until) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, until - Date.now());
        heard = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    last = { expected, acked: acks.get(nonce) ?? 0 };
    return last.acked >= expected;
  };
  const confirmed = async () => {
    await listener.subscribe(channels.ack);
    while (!over && !(await round()));
  };
  try {
    await withTimeout(confirmed(), timeoutMs, 'invalidation not confirmed');
    return null;
  } catch (err) {
    if (!(err instanceof TimeoutError)) throw err;
    const within = `within ${timeoutMs / 1000} s`;
    return last ? `${last.expected - last.acked} of ${last.expected} gateways did not confirm ${within}` : `Redis unreachable ${within}`;
  } finally {
    over = true;
    listener.disconnect();
  }
}
