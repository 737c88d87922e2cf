// The suppressed user IDs (intake users suppress), held in memory so that the gateway drops
// their Identify and Track calls without a round trip: a map of environment → user hash →
// suppressed since. A call of an environment with none costs one map lookup; one of an
// environment with some, a SHA-256 of its user ID.
//
// Freshness, as the key cache's (auth-cache.ts): suppress and unsuppress publish a nonce on a
// Redis channel; every gateway reads the whole set again from PostgreSQL and only then acks,
// and the command waits for every ack (operations/operator.ts). So once the command succeeds, every
// gateway drops the user's calls. A gateway that missed the message (its subscription was
// down) reads the set again when the subscription is back and every SUPPRESSION_REFRESH_MS.
// Workers and Identify's transaction check PostgreSQL as well (privacy/suppression.ts),
// so a call this set lets through while stale is still not stored; this set spares the queue
// and answers without waiting on the database.
//
// Memory: about 200 bytes per suppressed user ID (a 64-character hex key and a map entry).
//
// Counts: dropped calls are added up here and written to privacy_users about once a second
// (one statement for all users), off the request path; what a failed write held is tried again.
import type pg from 'pg';
import type { Counter } from 'prom-client';
import { answerInvalidations } from './invalidation-acks.ts';
import { hasId } from '../profiles/ids.ts';
import type { Logger } from '../platform/logger.ts';
import type { Redis } from '../platform/redis.ts';
import { dropReason } from '../privacy/rules.ts';
import { userHashOf } from '../profiles/person.ts';
import type { DroppedCall } from '../identify/dropped-calls.ts';
import { addDropped, loadSuppressions } from '../privacy/suppression.ts';

export type SuppressedApi = 'identify' | 'track';

export interface Suppressions {
  /** Whether this call is dropped: its (trimmed) user ID is suppressed since before `receivedAt`. Counts it when so. */
  drops(environment: { id: string; pathValue: string }, userId: string | null | undefined, receivedAt: number, api: SuppressedApi): boolean;
  /** Identify calls PostgreSQL's check dropped (the set had not heard yet): counted with the user's counts. */
  countDropped(dropped: DroppedCall[]): void;
  close(): Promise<void>;
}

export interface SuppressionsDeps {
  pool: pg.Pool;
  /** The gateway's connection in subscriber mode (shared with the key cache). */
  subscriber: Redis;
  publisher: Redis;
  channels: { invalidate: string; ack: string };
  refreshMs: number;
  /** intake_suppressed_calls_total{api,environment}. */
  counter: Counter<'api' | 'environment'>;
  log: Logger;
  /** How often counts are written (ms). */
  flushMs?: number;
}

export function createSuppressions(deps: SuppressionsDeps): Suppressions {
  const { pool, subscriber, publisher, channels, counter, log } = deps;
  let users = new Map<string, Map<string, number>>();
  let generation = 0;
  const pending = new Map<string, { env: string; hash: string; identify: number; track: number }>();

  /** Reads the whole set; a read overtaken by a newer one is not kept. */
  async function reload(): Promise<boolean> {
    const mine = ++generation;
    try {
      const read = await loadSuppressions(pool);
      if (mine === generation) users = read;
      return true;
    } catch (err) {
      log.warn({ err: (err as Error).message }, 'suppressions: could not read the suppressed users; keeping the set held');
      return false;
    }
  }

  // Ack only once this gateway holds the new set: the command's success means every gateway drops.
  answerInvalidations({ subscriber, publisher, channels, log, unsubscribed: 'suppressions: subscription unavailable, reading them periodically' }, reload);
  // ioredis subscribes again after a reconnect; what was published meanwhile was missed.
  subscriber.on('ready', () => void reload());
  void reload();
  const refresh = setInterval(() => void reload(), deps.refreshMs).unref();

  function tally(env: string, hash: string, api: SuppressedApi) {
    const key = `${env}:${hash}`;
    const p = pending.get(key) ?? pending.set(key, { env, hash, identify: 0, track: 0 }).get(key)!;
    p[api]++;
  }

  async function flush(): Promise<void> {
    if (!pending.size) return;
    const counts = [...pending.values()];
    pending.clear();
    try {
      await addDropped(pool, counts);
    } catch (err) {
      // Kept for the next write: a count is never lost while the process runs.
      for (const c of counts) {
        const key = `${c.env}:${c.hash}`;
        const p = pending.get(key);
        if (p) ((p.identify += c.identify), (p.track += c.track));
        else pending.set(key, c);
      }
      log.warn({ err: (err as Error).message }, 'suppressions: could not write the dropped-call counts; trying again');
    }
  }
  const flusher = setInterval(() => void flush(), deps.flushMs ?? 1000).unref();

  return {
    drops(environment, userId, receivedAt, api) {
      const suppressed = users.get(environment.id);
      if (!suppressed || !hasId(userId)) return false;
      const hash = userHashOf(userId).toString('hex');
      const since = suppressed.get(hash);
      if (since === undefined || dropReason({ erasedAt: null, suppressedAt: since }, receivedAt) === null) return false;
      counter.inc({ api, environment: environment.pathValue });
      tally(environment.id, hash, api);
      return true;
    },
    countDropped(dropped) {
      for (const d of dropped) if (d.reason === 'suppressed') tally(d.call.envId, d.call.userHashHex, 'identify');
    },
    async close() {
      clearInterval(refresh);
      clearInterval(flusher);
      await flush();
    },
  };
}
