// How full Redis is, as the gateway and the worker see it: INFO memory read on an interval (never
// per request), plus what this process wrote since. With `maxmemory` and `noeviction`, Redis
// refuses every write that may grow memory once used_memory passes maxmemory, and BullMQ's
// scripts that move a job to active or to completed are such writes: a queue filled to the brim
// cannot be drained by its workers. So Track stops at a high-water mark below maxmemory, and
// what is left above it stays for the workers to move, complete and thereby remove jobs.
// docs/reliability.md, "When Redis is full", has the design and its bounds.
import type { Logger } from './logger.ts';
import type { Cluster, Redis } from './redis.ts';
import { withTimeout } from './with-timeout.ts';

export interface MemoryReading {
  usedBytes: number;
  /** 0: no maxmemory. */
  maxBytes: number;
}

/**
 * Room kept below maxmemory whatever REDIS_HIGH_WATER_PERCENT says: a worker that starts while
 * Track is held at the mark opens its connections and loads BullMQ's scripts, which took
 * 0.35–0.6 MB of used_memory here (Redis 7.0, one worker process, concurrency 16).
 */
export const WORKER_HEADROOM_BYTES = 1_048_576;

/** used_memory and maxmemory from the text of `INFO memory`; null when either is missing. */
export function parseMemoryInfo(info: string): MemoryReading | null {
  const used = /^used_memory:(\d+)\r?$/m.exec(info);
  const max = /^maxmemory:(\d+)\r?$/m.exec(info);
  if (!used || !max) return null;
  return { usedBytes: Number(used[1]), maxBytes: Number(max[1]) };
}

/** Where Track stops: `percent` of maxmemory and at least WORKER_HEADROOM_BYTES below it; 100 = maxmemory itself; none without maxmemory. */
export function highWaterMark(maxBytes: number, percent: number): number {
  if (maxBytes === 0) return Infinity;
  if (percent >= 100) return maxBytes;
  return Math.max(0, Math.min(Math.floor((maxBytes * percent) / 100), maxBytes - WORKER_HEADROOM_BYTES));
}

/**
 * Where a full Redis counts as having room again: the mark, and with REDIS_HIGH_WATER_PERCENT=100
 * (mark = maxmemory) WORKER_HEADROOM_BYTES below it. Redis refuses a write once used_memory is
 * over maxmemory, and the refused write leaves it just under: without this, every reading after
 * a refusal would say "room" and the next write would be refused again.
 */
export function roomAgainBelow(maxBytes: number, mark: number): number {
  return Math.min(mark, maxBytes - WORKER_HEADROOM_BYTES);
}

/**
 * The error code of an error Redis answered (ioredis's ReplyError): the first word of the reply,
 * OOM, READONLY, CLUSTERDOWN and the like, which is the protocol's and never translated; null for
 * an error Redis did not send (a lost connection, a timeout, the client's own). Redis before 7.0
 * answers a script whose redis.call was refused with ERR and that refusal inside, its code still
 * behind the protocol's '-' after the script's line (`ERR Error running script (call to f_…):
 * @user_script:41: @user_script: 41: -OOM command not allowed …`): that inner code is the one.
 * The class is known by its name (redis-errors names each class after itself), not instanceof:
 * the CLI reads its errors without loading ioredis, and a second copy of ioredis (BullMQ's own,
 * should their versions part) would bring a ReplyError class of its own.
 */
export function redisErrorCode(err: unknown): string | null {
  if (!(err instanceof Error) || err.name !== 'ReplyError') return null;
  const message = err.message;
  const code = /^[A-Z][A-Z0-9_]*/.exec(message)?.[0] ?? null;
  if (code !== 'ERR') return code;
  return /@user_script: ?\d+: -([A-Z][A-Z0-9_]*)\b/.exec(message)?.[1] ?? code;
}

/** Redis refused a command for memory (maxmemory with noeviction), as a reply or inside a script. */
export function isOomError(err: unknown): boolean {
  return redisErrorCode(err) === 'OOM';
}

/**
 * What a batch job of `events` events carrying `payloadChars` of payload adds to used_memory, on
 * the high side: measured 1.27 × the payload plus about 1.1 KB per job (the job's hash, its
 * entries in the wait list and the events stream); each event's fields add a little more.
 */
export function estimatedJobBytes(events: number, payloadChars: number): number {
  return Math.ceil(1.5 * payloadChars) + 200 * events + 2048;
}

/** The fuller of two readings: the larger share of maxmemory (a server without maxmemory is never the fuller). */
export function fuller(a: MemoryReading, b: MemoryReading): MemoryReading {
  const share = (r: MemoryReading) => (r.maxBytes === 0 ? -1 : r.usedBytes / r.maxBytes);
  return share(b) > share(a) ? b : a;
}

/**
 * What watchRedisMemory reads: the one Redis, or on a cluster every master, of which the
 * fullest counts (a batch may go to any partition, so Track stops when any master is full).
 * A master that does not answer is left out.
 */
export function memorySource(redis: Redis): { status: string; info(section: string): Promise<string> } {
  if (!redis.isCluster) return redis;
  const cluster = redis as Cluster;
  return {
    get status() {
      return cluster.status;
    },
    async info(section: string) {
      const texts = await Promise.all(cluster.nodes('master').map((node) => node.info(section).catch(() => null)));
      let fullest: MemoryReading | null = null;
      for (const text of texts) {
        const reading = text === null ? null : parseMemoryInfo(text);
        if (reading) fullest = fullest ? fuller(fullest, reading) : reading;
      }
      if (!fullest) throw new Error('no master answered INFO memory');
      return `used_memory:${fullest.usedBytes}\nmaxmemory:${fullest.maxBytes}\n`;
    },
  };
}

export interface RedisMemory {
  /**
   * Whether writes should wait for memory: the last reading plus what this process wrote since
   * is at or over the high-water mark, or Redis refused a write for memory and no reading since
   * shows room again (roomAgainBelow). Free to call per request.
   */
  full(): boolean;
  /** Why it is full, for /readyz and the log; null when it is not. */
  reason(): string | null;
  /** The last reading with its high-water mark (Infinity without maxmemory); null when Redis did not answer the last attempt. */
  reading(): (MemoryReading & { highWaterBytes: number }) | null;
  /** Redis refused a write for memory: full at once, until a reading at least an interval later shows room. */
  refused(): void;
  /** This process stored about `bytes` in Redis: counted on top of the last reading until the next. */
  wrote(bytes: number): void;
  close(): void;
}

export interface RedisMemoryOptions {
  intervalMs: number;
  highWaterPercent: number;
  log: Logger;
}

const mb = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MB`;

/**
 * At most one line per this interval about becoming full or having room again: near the mark a
 * gateway can change state every reading while workers drain and callers refill.
 */
const STATE_LOG_MS = 10_000;

/** How long a reading may take; the next starts only once it is done. */
const READ_TIMEOUT_MS = 1000;

/**
 * Reads `INFO memory` every `intervalMs` on `redis` (skipped while the connection is not ready,
 * so nothing piles up in an offline queue) and logs when Redis becomes full and when it has room
 * again: at once, or while it changes often, its state once per STATE_LOG_MS with the count of changes.
 * A reading Redis does not answer changes nothing: full stays full (the enqueue fails anyway
 * while Redis is away) until a reading shows room.
 */
export function watchRedisMemory(redis: { status: string; info(section: string): Promise<string> }, options: RedisMemoryOptions): RedisMemory {
  const { intervalMs, highWaterPercent, log } = options;
  let last: MemoryReading | null = null;
  let answered = false;
  let mark = Infinity;
  let roomBelow = Infinity;
  let wroteSince = 0;
  let refusals = 0;
  let isFull = false;
  let reading: Promise<void> | null = null;
  let changes = 0;
  let loggedAt = -Infinity;

  const reasonNow = (): string | null => {
    if (!isFull) return null;
    const state = last ? `used_memory ${mb(last.usedBytes)} of maxmemory ${mb(last.maxBytes)}` : 'used_memory unknown';
    // Full below the mark, or over maxmemory: Redis refused a write, or will.
    const cause =
      last && last.usedBytes + wroteSince >= mark && last.usedBytes < last.maxBytes
        ? `at the high-water mark (${mb(mark)}, REDIS_HIGH_WATER_PERCENT=${highWaterPercent})`
        : 'refusing writes (OOM)';
    return `Redis memory is full: ${state}, ${cause}; Track answers 503 until workers drain the queue or maxmemory is raised`;
  };

  const logState = () => {
    loggedAt = performance.now();
    const fields = { redisMemory: last, highWaterBytes: Number.isFinite(mark) ? mark : null, changes };
    changes = 0;
    if (isFull) log.warn(fields, reasonNow()!);
    else log.info(fields, 'Redis memory has room again: Track accepts events');
  };
  const settle = (full: boolean) => {
    if (full === isFull) return;
    isFull = full;
    changes++;
    if (performance.now() - loggedAt >= STATE_LOG_MS) logState();
  };

  async function read() {
    const got = redis.status === 'ready' ? await withTimeout(redis.info('memory'), READ_TIMEOUT_MS, 'INFO memory').then(parseMemoryInfo, () => null) : null;
    answered = got !== null;
    if (!got) return;
    last = got;
    mark = highWaterMark(last.maxBytes, highWaterPercent);
    roomBelow = roomAgainBelow(last.maxBytes, mark);
    wroteSince = 0;
    // A refusal since the last reading keeps Redis full for this interval whatever it reads.
    const refused = refusals > 0;
    refusals = 0;
    settle(refused || last.usedBytes >= (isFull ? roomBelow : mark));
    if (changes && performance.now() - loggedAt >= STATE_LOG_MS) logState();
  }

  const refresh = () => {
    reading ??= read().finally(() => (reading = null));
  };
  refresh();
  const timer = setInterval(refresh, intervalMs);
  timer.unref();

  return {
    full: () => isFull,
    reason: reasonNow,
    reading: () => (answered && last ? { ...last, highWaterBytes: mark } : null),
    refused() {
      refusals++;
      settle(true);
    },
    wrote(bytes) {
      wroteSince += bytes;
      if (!isFull && last && last.usedBytes + wroteSince >= mark) settle(true);
    },
    close: () => clearInterval(timer),
  };
}
