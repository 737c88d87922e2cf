// Track group commit. The requests that arrive in the same turn of the event loop (up to
// `maxBatch` events and about `maxBytes` of payload) become ONE BullMQ job listing their
// events: BullMQ's cost (building a Job, its add script of about ten Redis commands, and the
// worker's fetch and completion scripts) is paid per batch, not per event. The job is stored
// whole or not at all, and each request is answered (202 or 503) by its own batch's outcome.
// No per-event job id: a messageId's row in event_ids makes a repeat one event.
// While Redis is full (platform/redis-memory.ts) an event is refused before it joins a batch.
// Batches take the partitions in the rotation (QUEUE_PARTITIONS of them; one by default) in turn
// (platform/partition-health.ts). A batch whose partition cannot take it (its master failing
// over or away, replicas not confirming, no answer within the partition's share of the bound)
// takes that partition out of the rotation and goes to the next one within the same bound: a
// batch written twice is harmless, event_ids makes each event one row. A partition out of the
// rotation is probed off the request path and comes back once a probe is confirmed; while none is
// in, an event is refused at once.
import type { Queue } from 'bullmq';
import { MaxRetriesPerRequestError } from 'ioredis/built/errors/index.js';
import { CONNECTION_CLOSED_ERROR_MSG } from 'ioredis/built/utils/index.js';
import {
  HEALTH_RULES,
  inRotation,
  nextInTurn,
  probeDue,
  probed,
  probeStarted,
  removed,
  type HealthRules,
  type PartitionHealth,
  type Rotation,
} from '../platform/partition-health.ts';
import type { Logger } from '../platform/logger.ts';
import { ReplicaAckError, withReplicaAcks } from '../platform/replica-ack.ts';
import type { Redis } from '../platform/redis.ts';
import { createMicroBatch } from '../platform/micro-batch.ts';
import { eventBatchName, type EventBatchJob, type QueuedEvent } from '../events/jobs.ts';
import { estimatedJobBytes, isOomError, redisErrorCode, type RedisMemory } from '../platform/redis-memory.ts';
import { TimeoutError, withTimeout } from '../platform/with-timeout.ts';

export interface EventBatcher {
  /** Resolves once the event's batch job is stored in Redis; rejects if Redis is full, no partition is in the rotation, or the add failed or timed out. */
  add(event: QueuedEvent): Promise<void>;
  /** Each partition's place in the rotation and how often it left and came back (for /readyz and /metrics; built when asked). */
  partitions(): PartitionStatus[];
  /** Resolves once the master of any partition answers a read in its slot (what /readyz asks of Redis); rejects when none does. */
  ping(): Promise<unknown>;
  /** Stops probing the partitions out of the rotation. */
  close(): void;
}

export interface PartitionStatus {
  /** The partition's queue name. */
  name: string;
  rotation: Rotation;
  removals: number;
  returns: number;
}

/** What add() rejects with while Redis is full (one instance: refusing costs nothing). */
export const REDIS_FULL = new Error('Redis memory is full');

/** What add() rejects with while no partition is in the rotation. */
export const NO_PARTITION = new Error('no partition of the events queue takes batches');

/** How long a probe's key lives: long enough for WAIT to confirm it, gone soon after. */
const PROBE_KEY_TTL_MS = 10_000;

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
  /** Told when a partition leaves the rotation and when it comes back. */
  log?: Pick<Logger, 'warn' | 'info'>;
  /** When partitions out of the rotation are probed (platform/partition-health.ts). */
  healthRules?: HealthRules;
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
 * Failures that take a partition out of the rotation, the batch going on to another: the
 * partition's master is away (a closed connection, a cluster still redirecting or down) or did
 * not get its replicas' confirmation (so does an attempt that outlives its share of the bound).
 * Redis refusing for memory is not one: every master gets the same traffic.
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
  const rules = options.healthRules ?? HEALTH_RULES;
  const health: PartitionHealth[] = queues.map(() => inRotation());
  const probes: (NodeJS.Timeout | undefined)[] = queues.map(() => undefined);
  // Kept with every transition: refusing while none is in costs a request one comparison.
  let inCount = queues.length;
  let turn = 0;
  let closed = false;
  // A probe has the bound a batch's first attempt has while every partition is in.
  const probeMs = Math.max(1, Math.floor(options.timeoutMs / queues.length));
  const probeKeys = queues.map((queue) => queue.toKey('probe'));
  const attemptTimedOut = `enqueue took longer than its share of ${options.timeoutMs} ms`;

  /** `write` (commands on `key`'s slot) and, with REDIS_MIN_REPLICA_ACKS, WAIT for the replicas until `deadline`. */
  function confirmed<T>(key: string, deadline: number, write: () => Promise<T>): Promise<T> {
    const acks = options.replicaAcks;
    if (!acks || acks.replicas === 0) return write();
    return withReplicaAcks(acks.connection, key, acks.replicas, deadline, write);
  }

  function add(queue: Queue<EventBatchJob>, events: QueuedEvent[], oldest: number, deadline: number) {
    // The job's timestamp is its oldest event's receipt: the journey watermark waits for it.
    return confirmed(queue.toKey('wait'), deadline, () => queue.add(eventBatchName(events.length), { events }, { timestamp: oldest }));
  }

  function takeOut(p: number, err: unknown) {
    const now = Date.now();
    const next = removed(health[p], now, rules);
    if (next === health[p]) return;
    health[p] = next;
    inCount--;
    options.log?.warn(
      { partition: queues[p].name, err: err instanceof Error ? err.message : String(err), inRotation: inCount, probeInMs: next.probeAt - now },
      'events queue partition out of the rotation',
    );
    scheduleProbe(p);
  }

  function scheduleProbe(p: number) {
    if (closed) return;
    probes[p] = setTimeout(() => void probe(p), Math.max(0, health[p].probeAt - Date.now()));
    probes[p].unref();
  }

  /** The ioredis connection intake gave its queues (events/jobs.ts), which BullMQ types as its own adapter. */
  const clientOf = async (queue: Queue<EventBatchJob>) => (await queue.client) as unknown as Redis;

  /**
   * A write of the probe key in the partition's slot, confirmed as a batch's add is (WAIT on the
   * connection that wrote it), within `probeMs`: what every batch needs of the partition, at the
   * cost of one small key that expires. Off the request path: no batch waits for it.
   */
  async function probe(p: number) {
    probes[p] = undefined;
    const queue = queues[p];
    if (closed || queue.closing) return;
    if (!probeDue(health[p], Date.now())) {
      if (health[p].rotation === 'out') scheduleProbe(p);
      return;
    }
    health[p] = probeStarted(health[p]);
    let ok = true;
    try {
      const client = await clientOf(queue);
      const key = probeKeys[p];
      await withTimeout(
        confirmed(key, Date.now() + probeMs, () => client.set(key, '1', 'PX', PROBE_KEY_TTL_MS)),
        probeMs,
        'the probe took longer than its bound',
      );
    } catch {
      ok = false;
    }
    const now = Date.now();
    const was = health[p];
    health[p] = probed(was, ok, now, rules);
    if (health[p].rotation === 'in') {
      inCount++;
      options.log?.info({ partition: queue.name, inRotation: inCount, outMs: now - was.outAt }, 'events queue partition back in the rotation');
    } else {
      scheduleProbe(p);
    }
  }

  async function write(events: QueuedEvent[]) {
    const deadline = Date.now() + options.timeoutMs;
    let oldest = events[0].receivedAt;
    for (const e of events) if (e.receivedAt < oldest) oldest = e.receivedAt;
    let failure: unknown = NO_PARTITION;
    for (;;) {
      const p = nextInTurn(health, turn);
      if (p < 0) throw failure;
      turn = p + 1;
      // Replicas that do not answer hold WAIT until its deadline: each partition in the rotation
      // keeps its share of what is left of the bound.
      const share = Math.max(1, Math.floor((deadline - Date.now()) / inCount));
      try {
        // WAIT ends a little before the attempt's bound: replicas that do not confirm are then told
        // (and logged) apart from a master that does not answer.
        await withTimeout(add(queues[p], events, oldest, Date.now() + share - Math.min(50, share >> 3)), share, attemptTimedOut);
        return;
      } catch (err) {
        if (!(err instanceof TimeoutError || triesAnotherPartition(err))) throw err;
        takeOut(p, err);
        if (Date.now() >= deadline) throw err;
        failure = err;
      }
    }
  }

  async function writeWithin(events: QueuedEvent[]) {
    try {
      await write(events);
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
  return {
    add: (event) => (options.memory?.full() ? Promise.reject(REDIS_FULL) : inCount === 0 ? Promise.reject(NO_PARTITION) : batch.add(event)),
    partitions: () => queues.map((queue, p) => ({ name: queue.name, rotation: health[p].rotation, removals: health[p].removals, returns: health[p].returns })),
    // A read keyed to each partition's slot goes to that partition's master: on a cluster a plain
    // PING goes to a master picked at random, which may be one that has just died.
    ping: () => Promise.any(queues.map(async (queue, p) => (await clientOf(queue)).pttl(probeKeys[p]))),
    close() {
      closed = true;
      for (const timer of probes) clearTimeout(timer);
    },
  };
}
