// The worker's guard: a worker stores a batch of events while holding each of their
// environments' erasure lock shared (profiles/person.ts, lock 1), so an erasure, which holds it
// exclusively, never misses an event stored beside it; events of a tombstoned or suppressed
// user are dropped here, the suppressed ones counted.
import type pg from 'pg';
import { Pipeline } from '../platform/pipeline.ts';
import { hasId } from '../profiles/ids.ts';
import { environmentLock, LOCK_SHARED_SQL, lockParam, sortedLocks, userHashOf } from '../profiles/person.ts';
import { dropReason, type DropReason } from '../privacy/rules.ts';
import { addDropped, privacyStates, PRIVACY_OF_USERS_SQL, type PrivacyRow } from '../privacy/suppression.ts';
import type { EventRow } from './event-store.ts';

export interface GuardedRows {
  /** The rows to store. */
  kept: EventRow[];
  /** The rows a tombstone or a suppression drops, with why. */
  dropped: { row: EventRow; reason: DropReason }[];
}

export interface ErasureGuard {
  /**
   * Runs a worker's store of `rows` while holding each of their environments' erasure lock
   * shared. `work` gets the rows no tombstone or suppression drops; the drops of suppressed
   * users are counted (privacy_users) when the work succeeds.
   */
  hold<T>(rows: readonly EventRow[], work: (guarded: GuardedRows) => Promise<T>): Promise<T>;
}

/**
 * The guard of one worker process: its locks are held on connections of `pool`, a pool of its
 * own (the work inside needs the process's other connections), at most `slots` at a time; more
 * batches wait their turn here, in memory, rather than for a connection (whose wait is bounded
 * for an unreachable server).
 */
export function createErasureGuard(pool: pg.Pool, slots: number): ErasureGuard {
  let free = slots;
  const waiting: (() => void)[] = [];
  const acquire = () => (free > 0 ? (free--, Promise.resolve()) : new Promise<void>((resolve) => waiting.push(resolve)));
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return {
    async hold(rows, work) {
      await acquire();
      try {
        return await withErasureGuard(pool, rows, work);
      } finally {
        release();
      }
    },
  };
}

async function withErasureGuard<T>(pool: pg.Pool, rows: readonly EventRow[], work: (guarded: GuardedRows) => Promise<T>): Promise<T> {
  const envs = [...new Set(rows.map((r) => r.environmentId))];
  const keys = sortedLocks(envs.map(environmentLock));
  const users = new Map<string, { env: string; hash: string }>();
  const hashOf = rows.map((r) => {
    if (!hasId(r.userId)) return null;
    const h = userHashOf(r.userId).toString('hex');
    users.set(`${r.environmentId}:${h}`, { env: r.environmentId, hash: h });
    return h;
  });
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (err: Error) => (broken = err);
  client.on('error', onError);
  try {
    const pipe = new Pipeline(client);
    pipe.query({ text: 'BEGIN' });
    pipe.query({ name: 'erasure-guard-lock', text: LOCK_SHARED_SQL, values: [lockParam(keys)] });
    const list = [...users.values()];
    const read = pipe.query<PrivacyRow>({ name: 'erasure-guard', text: PRIVACY_OF_USERS_SQL, values: [list.map((u) => u.env), list.map((u) => u.hash)] });
    await pipe.done();
    const states = privacyStates((await read).rows);
    const guarded: GuardedRows = { kept: [], dropped: [] };
    rows.forEach((row, i) => {
      const reason = hashOf[i] === null ? null : dropReason(states.get(`${row.environmentId}:${hashOf[i]}`), row.receivedAt);
      if (reason) guarded.dropped.push({ row, reason });
      else guarded.kept.push(row);
    });
    const result = await work(guarded);
    const counts = new Map<string, { env: string; hash: string; identify: number; track: number }>();
    guarded.dropped.forEach(({ row, reason }) => {
      if (reason !== 'suppressed') return;
      const h = userHashOf(row.userId!).toString('hex');
      const c = counts.get(`${row.environmentId}:${h}`) ?? { env: row.environmentId, hash: h, identify: 0, track: 0 };
      c.track++;
      counts.set(`${row.environmentId}:${h}`, c);
    });
    await addDropped(client, [...counts.values()]);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    throw err;
  } finally {
    client.off('error', onError);
    client.release(broken);
  }
}
