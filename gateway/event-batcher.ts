// Track group commit. The requests that arrive in the same turn of the event loop (up to
// `maxBatch` events and about `maxBytes` of payload) become ONE BullMQ job listing their
// events: BullMQ's cost (building a Job, its add script of about ten Redis commands, and the
// worker's fetch and completion scripts) is paid per batch, not per event. The job is stored
// whole or not at all, and each request is answered (202 or 503) by its own batch's outcome.
// No per-event job id: a messageId's row in event_ids makes a repeat one event.
// While Redis is full (common/redis-memory.ts) an event is refused before it joins a batch.
// With several partitions (QUEUE_PARTITIONS) batches take them in turn, and a batch whose
// partition cannot take it (its master failing over, replicas not confirming) goes to the next
// one within the same bound: a batch written twice is harmless, event_ids makes each
// event one row.
import type { Queue } from 'bullmq';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors/index.js';
import { CONNECTION_CLOSED_ERROR_MSG } from 'ioredis/built/utils/index.js';
import { ReplicaAckError, withReplicaAcks } from '../common/replica-ack.ts';
import type { Redis } from '../common/redis.ts';
import { createMicroBatch } from '../common/micro-batch.ts';
import { eventBatchName, type EventBatchJob, type QueuedEvent } from '../common/queues.ts';
import { estimatedJobBytes, isOomError, redisErrorCode, type RedisMemory } from '../common/redis-memory.ts';
import { withTimeout } from '../common/with-timeout.ts';

export interface EventBatcher {
  /** Resolves once the event's batch job is stored in Redis; rejects if Redis is full, or the add failed or timed out. */
  add(event: QueuedEvent): Promise<void>;
}

/** What add() rejects with while Redis is full (one instance: refusing costs nothing). */
export const REDIS_FULL = new Error('Redis memory is full');

export interface BatcherOptions {
  maxBatch: number;
  /** Payload bytes one job carries at most (a batch always takes one event, whatever its size). */
  maxBytes: number;
  timeoutMs: number;
  /** Called after each batch with its size, for metrics. */
  onBatch?: (size: number, ok: boolean) => void;
  /** Redis's memory: told what each batch wrote and each refusal for memory. */
  memory?: Pick<RedisMemory, 'full' | 'refused' | 'wrote'>;
  /** REDIS_MIN_REPLICA_ACKS: a batch is stored once WAIT on `connection` says this many replicas hold it. */
  replicaAcks?: { replicas: number; connection: Redis };
}

/**
 * Redis's answers while a partition's master is away: the cluster down or a slot moving
 * (CLUSTERDOWN, TRYAGAIN), a write that reached a demoted master (READONLY), a replica that lost
 * its master (MASTERDOWN).
 */
const MASTER_AWAY_CODES = new Set(['CLUSTERDOWN', 'TRYAGAIN', 'READONLY', 'MASTERDOWN']);

/**
 * ioredis's own refusals of a command it could not send, plain Errors known by their message
 * alone: ioredis exports no class and no constant for them (Redis.js sendCommand and
 * cluster/index.js, ioredis 5.11), so their text is the only signal.
 */
const NOT_SENT_PREFIXES = ["Stream isn't writeable", "Cluster isn't ready", 'Too many Cluster redirections.'];

/**
 * Failures after which a batch may go to another partition: the partition's master is away
 * (a closed connection, a cluster still redirecting or down) or did not get its replicas'
 * confirmation. Redis refusing for memory is not one: every master gets the same traffic.
 */
export function triesAnotherPartition(err: unknown): boolean {
  if (err instanceof ReplicaAckError || err instanceof MaxRetriesPerRequestError) return true;
  const code = redisErrorCode(err);
  if (code !== null) return MASTER_AWAY_CODES.has(code);
  if (!(err instanceof Error)) return false;
  // ioredis rejects with a plain Error carrying its exported message: compared with that constant, not a copy.
  if (err.message === CONNECTION_CLOSED_ERROR_MSG) return true;
  return NOT_SENT_PREFIXES.some((prefix) => err.message.startsWith(prefix));
}

export function createEventBatcher(partitions: Queue<EventBatchJob> | Queue<EventBatchJob>[], options: BatcherOptions): EventBatcher {
  const queues = Array.isArray(partitions) ? partitions : [partitions];
  let turn = 0;

  function add(queue: Queue<EventBatchJob>, events: QueuedEvent[], oldest: number, deadline: number) {
    // The job's timestamp is its oldest event's receipt: the journey watermark waits for it.
    const stored = () => queue.add(eventBatchName(events.length), { events }, { timestamp: oldest });
    const acks = options.replicaAcks;
    if (!acks || acks.replicas === 0) return stored();
    return withReplicaAcks(acks.connection, queue.toKey('wait'), acks.replicas, deadline, stored);
  }

  async function write(events: QueuedEvent[]) {
    const deadline = Date.now() + options.timeoutMs;
    let oldest = events[0].receivedAt;
    for (const e of events) if (e.receivedAt < oldest) oldest = e.receivedAt;
    const first = turn++ % queues.length;
    for (let i = 0; ; i++) {
      // Replicas that do not answer hold WAIT until its deadline: each partition still to be
      // tried keeps its share of the bound.
      const share = Math.floor((deadline - Date.now()) / (queues.length - i));
      try {
        await add(queues[(first + i) % queues.length], events, oldest, Date.now() + share);
        return;
      } catch (err) {
        if (i + 1 >= queues.length || Date.now() >= deadline || !triesAnotherPartition(err)) throw err;
      }
    }
  }

  async function writeWithin(events: QueuedEvent[]) {
    try {
      await withTimeout(write(events), options.timeoutMs, `enqueue took longer than ${options.timeoutMs} ms`);
      options.onBatch?.(events.length, true);
    } catch (err) {
      options.onBatch?.(events.length, false);
      if (isOomError(err)) options.memory?.refused();
      throw err;
    }
    if (options.memory) {
      let chars = 0;
      for (const e of events) chars += e.payload.length;
      options.memory.wrote(estimatedJobBytes(events.length, chars));
    }
  }

  const batch = createMicroBatch(writeWithin, {
    maxBatch: options.maxBatch,
    waitMs: 0,
    // String length, not UTF-8 bytes: close enough for a memory bound, and free.
    weight: (e: QueuedEvent) => e.payload.length,
    maxWeight: options.maxBytes,
  });
  return { add: (event) => (options.memory?.full() ? Promise.reject(REDIS_FULL) : batch.add(event)) };
}
