// API-key lookups served from memory: the hot path makes no round trip for a known key.
// Operator commands that change what a lookup returns (key revoke/create, env remove, org
// features) publish a nonce on a Redis channel; every gateway drops its whole cache and
// answers with the nonce on an ack channel, and the command waits for every gateway's ack
// (cli/operator.ts). So once `key revoke` returns, no gateway serves the key from memory.
// While its subscription is down a gateway cannot hear invalidations, so it reads through
// to PostgreSQL until the subscription is back, and starts over with an empty cache then.
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import type { Redis } from '../common/redis.ts';
import { findKeyByHash, type KeyRecord } from '../common/store/environments.ts';

export interface AuthCache {
  lookup(hash: string): Promise<KeyRecord | null>;
  close(): Promise<void>;
}

interface Entry {
  record: KeyRecord | null;
  expiresAt: number;
}

const MAX_ENTRIES = 100_000;

export interface AuthCacheDeps {
  db: Db;
  /** A dedicated connection in subscriber mode. */
  subscriber: Redis;
  /** Any other connection, to publish acks on. */
  publisher: Redis;
  channels: { invalidate: string; ack: string };
  ttlMs: number;
  log: Logger;
}

export function createAuthCache(deps: AuthCacheDeps): AuthCache {
  const { db, subscriber, publisher, channels, ttlMs, log } = deps;
  const entries = new Map<string, Entry>();
  // Bumped on every invalidation so a lookup that raced with one does not store a stale row.
  let generation = 0;
  let listening = false;

  const invalidate = () => {
    generation++;
    entries.clear();
  };
  subscriber.on('message', (channel: string, nonce: string) => {
    if (channel !== channels.invalidate) return;
    invalidate();
    publisher.publish(channels.ack, nonce).catch(() => {});
  });
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
  subscriber.subscribe(channels.invalidate).then(
    () => (listening = subscriber.status === 'ready'),
    (err: Error) => log.warn({ err: err.message }, 'auth cache: subscription unavailable, reading keys through'),
  );

  return {
    async lookup(hash) {
      const now = Date.now();
      if (listening && ttlMs > 0) {
        const hit = entries.get(hash);
        if (hit && hit.expiresAt > now) return hit.record;
      }
      const seen = generation;
      const record = await findKeyByHash(db, hash);
      if (listening && ttlMs > 0 && seen === generation) {
        if (entries.size >= MAX_ENTRIES) entries.clear();
        entries.set(hash, { record, expiresAt: now + ttlMs });
      }
      return record;
    },
    async close() {
      entries.clear();
      subscriber.disconnect();
    },
  };
}
