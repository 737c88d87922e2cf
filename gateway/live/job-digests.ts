// The live view's reads of a queue: which jobs wait, and the heads of their events
// (batch-digest.ts), at a cost that does not grow with what the jobs carry. A job's id, timestamp
// and data length are metadata (HMGET, HSTRLEN: O(1) each, whatever the job holds). Its events'
// heads are found in Redis by HEADS_SCRIPT, once: they are kept under the job's key, timestamp and
// data length (a job changed by an erasure, or removed and made again, is read anew), and later
// reads use what is kept. One read has the script go through at most `bytesPerRead` bytes of
// jobs, newest first, one job per call and at most SCRIPTS_AT_ONCE calls in flight (round trips
// do not add up, and Redis, which runs a client's pipelined calls back to back, serves other
// clients after that many jobs at most); the jobs left over are counted, and the next reads go
// on with them. A job being read is read once, whoever else asks meanwhile.
//
// Why a script that returns heads rather than the jobs' bytes: Redis has no range read of a
// hash field, so either way it reads whole jobs, once each. Measured on 300 jobs of one 630 KB
// event (bench/live-view-cost.mts views): the script costs Redis 0.9 ms of CPU a job (it copies
// the field into Lua) and sends a few hundred bytes an event; HGET costs Redis 0.25 ms but sends
// the whole job, and the two page views that read the jobs took 164 and 189 ms against 94 and 85.
// What leaves Redis for a page is then bounded by the events it shows, not by their properties.
import type { Queue } from 'bullmq';
import { arrayBytes, MAP_ENTRY_BYTES, NUMBER_BYTES, objectBytes, stringBytes } from '../../platform/heap-size.ts';
import { Lru } from '../../platform/lru.ts';
import type { Redis } from '../../platform/redis.ts';
import { HEADS_SCRIPT, parseHead, type EventHead, type HeadField } from './batch-digest.ts';

/** The job states whose events are not stored yet. */
export type ListedState = 'active' | 'waiting' | 'prioritized' | 'delayed' | 'failed';

export interface ListedJob {
  id: string;
  timestamp: number;
  /** The other hash fields asked for (finishedOn, failedReason…), null where absent. */
  fields: Record<string, string | null>;
  /** The heads of its events; null when this read's budget left it unread. */
  heads: EventHead[] | null;
}

export interface Listing {
  /** Newest first (the job's timestamp: the oldest receivedAt of its events). */
  jobs: ListedJob[];
  /** Jobs left unread by this read's budget, and the bytes of their data. */
  unread: { jobs: number; bytes: number };
}

export interface JobDigests {
  /** The newest `perState` jobs of each state, with their events' heads as far as the read's budget goes. */
  list(queue: Queue, states: ListedState[], perState: number, fields?: string[]): Promise<Listing>;
}

/** Script calls in flight at once: a few, so that Redis never runs many jobs' scripts in a row. */
const SCRIPTS_AT_ONCE = 4;

interface Kept {
  heads: EventHead[];
  bytes: number;
}

/** `redis`: the connection of the queues listed (their keys are read with it). */
export function createJobDigests(options: { redis: Redis; bytesPerRead: number; cacheBytes: number }): JobDigests {
  const { redis } = options;
  // ioredis sends it by its SHA1 and loads it where a node does not know it yet.
  redis.defineCommand('liveEventHeads', { numberOfKeys: 1, lua: HEADS_SCRIPT });
  const eventHeads = (key: string) => (redis as unknown as { liveEventHeads(key: string): Promise<string[]> }).liveEventHeads(key);
  const kept = new Lru<string, Kept>(options.cacheBytes);
  const reading = new Map<string, Promise<EventHead[]>>();
  let running = 0;
  const waiting: (() => void)[] = [];
  async function inTurn<T>(call: () => Promise<T>): Promise<T> {
    if (running >= SCRIPTS_AT_ONCE) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await call();
    } finally {
      running--;
      waiting.shift()?.();
    }
  }

  function digest(key: string, cacheKey: string): Promise<EventHead[]> {
    let pending = reading.get(cacheKey);
    if (!pending) {
      pending = inTurn(() => eventHeads(key))
        .then((texts) => {
          const heads = texts.map(parseHead).filter((head) => head !== null);
          kept.set(cacheKey, { heads, bytes: keptBytes(cacheKey, heads) });
          kept.trim();
          return heads;
        })
        .finally(() => reading.delete(cacheKey));
      reading.set(cacheKey, pending);
    }
    return pending;
  }

  return {
    async list(queue, states, perState, fields = []) {
      const ids = await queue.getRanges(states, 0, perState - 1);
      const meta = await Promise.all(
        ids.map(async (id) => {
          const key = queue.toKey(id);
          const [values, length] = await Promise.all([redis.hmget(key, 'timestamp', ...fields), redis.hstrlen(key, 'data')]);
          return { id, key, values, length };
        }),
      );
      const present = meta.filter((m) => m.values[0] !== null).sort((a, b) => Number(b.values[0]) - Number(a.values[0]));
      const unread = { jobs: 0, bytes: 0 };
      let spent = 0;
      const jobs = await Promise.all(
        present.map(async ({ id, key, values, length }): Promise<ListedJob> => {
          const cacheKey = `${key}:${values[0]}:${length}`;
          let heads = kept.get(cacheKey)?.heads ?? null;
          // The first job is read whatever its size, so every read makes progress.
          if (!heads && (spent === 0 || spent + length <= options.bytesPerRead)) {
            spent += length;
            heads = await digest(key, cacheKey);
          } else if (!heads) {
            unread.jobs++;
            unread.bytes += length;
          }
          return { id, timestamp: Number(values[0]), fields: Object.fromEntries(fields.map((f, i) => [f, values[i + 1]])), heads };
        }),
      );
      return { jobs, unread };
    },
  };
}

function fieldBytes(field: HeadField | null): number {
  return field ? objectBytes(3) + stringBytes(field.value) + (field.hash ? stringBytes(field.hash) : 0) : 0;
}

/** What a job's kept heads cost on the heap, so the cache is bounded by what it holds. */
function keptBytes(cacheKey: string, heads: EventHead[]): number {
  let bytes = MAP_ENTRY_BYTES + stringBytes(cacheKey) + objectBytes(2) + arrayBytes(heads.length);
  for (const h of heads) {
    bytes += objectBytes(6) + stringBytes(h.environmentId) + NUMBER_BYTES;
    bytes += fieldBytes(h.messageId) + fieldBytes(h.event) + fieldBytes(h.userId) + fieldBytes(h.anonymousId);
  }
  return bytes;
}

/** The jobs the listings left unread, added up. */
export function unreadOf(listings: Listing[]): { jobs: number; bytes: number } {
  const unread = { jobs: 0, bytes: 0 };
  for (const l of listings) {
    unread.jobs += l.unread.jobs;
    unread.bytes += l.unread.bytes;
  }
  return unread;
}
