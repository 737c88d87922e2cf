// API-key lookups served from memory (key-cache.ts): the hot path makes no round trip for a
// known key, and Track, which needs only Redis to accept an event, keeps accepting known keys
// while PostgreSQL is away.
//
// Revocation. Operator commands that change what a lookup returns (key revoke, env remove,
// org features) publish a nonce on a Redis channel; every gateway drops its whole cache and
// answers with the nonce on an ack channel, and the command waits for every gateway's ack
// (operations/operator.ts). So once such a command succeeds, no gateway serves the old answer from
// memory. While its subscription is down a gateway cannot hear invalidations, so it keeps
// nothing and reads every key through to PostgreSQL, and starts over with an empty cache
// once the subscription is back.
//
// Freshness. An entry is trusted for KEY_CACHE_TTL_MS, then read again. If that read fails
// (PostgreSQL unreachable), the entry is still served until KEY_CACHE_STALE_MAX_MS after it
// was last read, and the gateway counts PostgreSQL as unreachable: lapsed entries are then
// served at once, while one read a second probes PostgreSQL in the background. The first
// probe that succeeds ends that state; from then on a lapsed entry is read again before use,
// so an answer that changed during the outage (a revocation this gateway did not hear) takes
// effect within about a second of PostgreSQL answering. A key with no entry needs PostgreSQL:
// while it is away such a request gets the spec's temporary 500.
import type { Db } from '../platform/db.ts';
import { answerInvalidations } from './invalidation-acks.ts';
import type { Logger } from '../platform/logger.ts';
import type { Redis } from '../platform/redis.ts';
import { findKeyByHash, type KeyRecord } from '../environments/environment-store.ts';
import { KeyCache } from './key-cache.ts';

export interface AuthCache {
  /** The answer memory may give now, without PostgreSQL; undefined when only lookup can. */
  cached(hash: string): KeyRecord | null | undefined;
  lookup(hash: string): Promise<KeyRecord | null>;
  close(): Promise<void>;
}

export interface AuthCacheDeps {
  db: Db;
  /** A dedicated connection in subscriber mode. */
  subscriber: Redis;
  /** Any other connection, to publish acks on. */
  publisher: Redis;
  channels: { invalidate: string; ack: string };
  ttlMs: number;
  staleMaxMs: number;
  maxBytes: number;
  log: Logger;
}

/** While PostgreSQL is unreachable, at most one background read per this interval. */
const PROBE_INTERVAL_MS = 1000;
/** Reads that an invalidation overtook are done again, up to this many times in all. */
const READ_ATTEMPTS = 3;

export function createAuthCache(deps: AuthCacheDeps): AuthCache {
  const { db, subscriber, publisher, channels, ttlMs, staleMaxMs, log } = deps;
  const cache = new KeyCache(deps.maxBytes);
  /** One read per hash at a time: a burst of requests with the same (or the same unknown) key costs one query. */
  const reading = new Map<string, Promise<KeyRecord | null>>();
  // Bumped on every invalidation, so a read that raced with one is done again, not stored.
  let generation = 0;
  let listening = false;
  let unreachable = false;
  let nextProbeAt = 0;

  const invalidate = () => {
    generation++;
    cache.clear();
    reading.clear();
  };
  // ioredis re-subscribes on reconnect; anything published while we were away was missed.
  subscriber.on('ready', () => {
    invalidate();
    listening = true;
  });
  for (const lost of ['close', 'reconnecting', 'end'] as const) {
    subscriber.on(lost, () => {
      listening = false;
      invalidate();
    });
  }
  // Not awaited: a gateway must start (and answer) while Redis is down.
  const unsubscribed = 'auth cache: subscription unavailable, reading keys through';
  void answerInvalidations({ subscriber, publisher, channels, log, unsubscribed }, () => {
    invalidate();
    return Promise.resolve(true);
  }).then((subscribed) => {
    if (subscribed) listening = subscriber.status === 'ready';
  });

  const caching = () => listening && ttlMs > 0;

  const reached = (ok: boolean) => {
    if (ok === !unreachable) return;
    unreachable = !ok;
    if (unreachable) log.warn({ staleMaxMs }, 'auth cache: PostgreSQL unreachable, serving cached keys');
    else log.info('auth cache: PostgreSQL answers again, cached keys are read again once lapsed');
  };

  async function readThrough(hash: string): Promise<KeyRecord | null> {
    for (let attempt = 1; ; attempt++) {
      const seen = generation;
      let record: KeyRecord | null;
      try {
        record = await findKeyByHash(db, hash);
      } catch (err) {
        reached(false);
        throw err;
      }
      reached(true);
      if (seen === generation) {
        if (caching()) cache.put(hash, record, Date.now());
        return record;
      }
      // An invalidation arrived meanwhile: this answer may predate what it announced.
      if (attempt === READ_ATTEMPTS) return record;
    }
  }

  function read(hash: string): Promise<KeyRecord | null> {
    let pending = reading.get(hash);
    if (!pending) {
      const started = readThrough(hash).finally(() => {
        if (reading.get(hash) === started) reading.delete(hash);
      });
      reading.set(hash, started);
      pending = started;
    }
    return pending;
  }

  /** While PostgreSQL is unreachable: one background read now and then, to notice its return. */
  function probe(hash: string, now: number): void {
    if (now < nextProbeAt) return;
    nextProbeAt = now + PROBE_INTERVAL_MS;
    read(hash).catch(() => {});
  }

  function cached(hash: string): KeyRecord | null | undefined {
    if (!caching()) return undefined;
    const entry = cache.get(hash);
    if (!entry) return undefined;
    const now = Date.now();
    const age = now - entry.verifiedAt;
    if (age < ttlMs) return entry.record;
    if (unreachable && age < staleMaxMs) {
      probe(hash, now);
      return entry.record;
    }
    return undefined;
  }

  return {
    cached,
    async lookup(hash) {
      const known = cached(hash);
      if (known !== undefined) return known;
      if (!caching()) return findKeyByHash(db, hash);
      const entry = cache.get(hash);
      try {
        return await read(hash);
      } catch (err) {
        // The entry, if it is still the one read before the failure (no invalidation since).
        const stale = entry && cache.get(hash) === entry && Date.now() - entry.verifiedAt < staleMaxMs;
        if (stale) return entry.record;
        throw err;
      }
    },
    async close() {
      cache.clear();
      subscriber.disconnect();
    },
  };
}
