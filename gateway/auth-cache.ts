// API-key lookups served from memory. Operator commands that revoke a key or remove an
// environment publish on a Redis channel and every gateway drops its whole cache at once.
// While the subscription is down a gateway cannot hear revocations, so it reads through to
// PostgreSQL until the subscription is back (and starts over with an empty cache then).
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

export function createAuthCache(deps: { db: Db; subscriber: Redis; channel: string; ttlMs: number; log: Logger }): AuthCache {
  const { db, subscriber, channel, ttlMs, log } = deps;
  const entries = new Map<string, Entry>();
  // Bumped on every invalidation so a lookup that raced with one does not store a stale row.
  let generation = 0;
  let listening = false;

  const invalidate = () => {
    generation++;
    entries.clear();
  };
  subscriber.on('message', (ch) => ch === channel && invalidate());
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
  subscriber.subscribe(channel).then(
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
