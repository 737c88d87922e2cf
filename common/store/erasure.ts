// Erasing a person (intake users forget) and the guard that keeps queued events of an erased
// person out of the events table.
//
// Why nothing comes back. The erasure runs in one transaction that first takes, exclusively,
// the environment's erasure lock, then the locks Identify's batches (identify-batch.ts) and
// the journey engine (journey-runs.ts: inPersonLock) take for each user ID of the person, and
// only then writes the tombstone (privacy_users.erased_at, PostgreSQL's clock) and deletes.
// - A worker stores a batch while holding that environment lock shared (ErasureGuard below),
//   and reads the tombstones after taking it. So a batch either committed before the erasure
//   took the lock (and the erasure deletes its rows), or reads the tombstone and drops the
//   events received up to its time.
// - An Identify batch reads the tombstones under its user locks: committed before (the
//   erasure removes it) or dropped.
// - The journey engine starts a run of a profile change under the person's lock, and checks
//   the tombstone there; a run from an event needs the stored event, which is gone.
import type pg from 'pg';
import { withQueryTimeout } from '../db.ts';
import { hashStored } from '../domain/identity-hash.ts';
import { hasId } from '../domain/ids.ts';
import { fromPgText, toPgText } from '../domain/pg-text.ts';
import { decisionsToRemove, dropReason, userHashOf, userKeyBits, type DropReason } from '../domain/privacy.ts';
import type { EventRow } from './events.ts';
import { advisoryKey, userLockKey } from './identify-write.ts';
import { addDropped, AUDIT_SQL, auditValues, privacyStates, type PrivacyRow, PRIVACY_OF_USERS_SQL } from './suppression.ts';
import { Pipeline } from '../pipeline.ts';

/** The lock an erasure holds exclusively and a worker's store holds shared, per environment. */
export function erasureLockKey(environmentId: string): bigint {
  return advisoryKey(`erasure:${environmentId}`);
}

/** How long an erasure may take, its lock waits included (the pool's bound is for requests). */
const ERASURE_TIMEOUT_MS = 300_000;

export interface ForgetOptions {
  environmentId: string;
  userId: string;
  suppress: boolean;
  operator: string;
}

/** What `intake users forget` removed, counted per kind. */
export interface ForgetSummary {
  userHash: string;
  erasedAt: number;
  suppressed: boolean;
  /** The other user IDs that read the same (joined) profile: erased with it. */
  joinedUserIds: string[];
  removed: {
    profiles: number;
    traits: number;
    userIds: number;
    addressClaims: number;
    consentDecisions: number;
    events: number;
    journeyRuns: number;
    journeyMessages: number;
    identifyMessages: number;
    outboxEvents: number;
  };
  /** Consent decisions of the person's addresses that another profile also claimed: kept. */
  consentDecisionsKept: number;
}

interface PersonRows {
  profileId: string | null;
  /** Stored user IDs (trimmed, pg-text) that read the profile, the erased one included. */
  userKeys: string[];
}

async function readPerson(client: pg.PoolClient, environmentId: string, userKey: string): Promise<PersonRows> {
  const { rows } = await longQuery(client)<{ profile_id: string; user_id: string }>(
    `SELECT u.profile_id::text, o.user_id FROM profile_users u JOIN profile_users o ON o.profile_id = u.profile_id
      WHERE u.environment_id = $1 AND u.user_hash = $2`,
    [environmentId, hashStored(userKey)],
  );
  const keys = new Set([userKey, ...rows.map((r) => r.user_id)]);
  return { profileId: rows[0]?.profile_id ?? null, userKeys: [...keys].sort() };
}

/** Queries on `client` bounded by ERASURE_TIMEOUT_MS on the client's side too (the pool's bound is for requests). */
function longQuery(client: pg.PoolClient) {
  return <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => client.query<R>(withQueryTimeout({ text, values }, ERASURE_TIMEOUT_MS));
}

const msNow = `floor(extract(epoch FROM clock_timestamp()) * 1000)::int8`;

/**
 * Removes everything held about the person in one transaction (see the top of this file for
 * why it takes its locks first). A deadlock with an Identify batch (which locks the users of
 * a joined profile in its own order) runs it again.
 */
export async function forgetUser(pool: pg.Pool, options: ForgetOptions): Promise<ForgetSummary> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await forgetOnce(pool, options);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (attempt >= 5 || (code !== '40P01' && code !== '40001')) throw err;
    }
  }
}

async function forgetOnce(pool: pg.Pool, options: ForgetOptions): Promise<ForgetSummary> {
  const { environmentId: env, userId } = options;
  const userKey = toPgText(userId.trim());
  const userHash = userHashOf(userId);
  const client = await pool.connect();
  // The pool's client-side bound is for requests; an erasure's statements get its own.
  const q = longQuery(client);
  try {
    await q(`BEGIN; SET LOCAL statement_timeout = ${ERASURE_TIMEOUT_MS}; SET LOCAL lock_timeout = ${ERASURE_TIMEOUT_MS}`);
    let person = await readPerson(client, env, userKey);
    // The environment's lock first (queued events wait for it), then each user's, in key order.
    await q('SELECT pg_advisory_xact_lock($1)', [erasureLockKey(env).toString()]);
    for (;;) {
      await lockUsers(client, env, person.userKeys);
      const again = await readPerson(client, env, userKey);
      if (again.userKeys.every((k) => person.userKeys.includes(k)) && again.profileId === person.profileId) break;
      // Joined meanwhile: lock the new user IDs too (more locks in the same transaction are safe).
      person = { profileId: again.profileId, userKeys: [...new Set([...person.userKeys, ...again.userKeys])].sort() };
    }
    const hashes = person.userKeys.map(hashStored);
    const { rows: clock } = await q<{ now: string }>(`SELECT ${msNow}::text AS now`);
    const erasedAt = Number(clock[0].now);
    const p = person.profileId;
    const count = async (text: string, values: unknown[]) => (await q(text, values)).rowCount ?? 0;

    // Events are matched by the user ID as stored (not trimmed): the trimmed IDs and the ID as given.
    const eventUserIds = [...new Set([...person.userKeys, toPgText(userId)])];
    const events = await count('DELETE FROM events WHERE environment_id = $1 AND user_id = ANY($2::text[])', [env, eventUserIds]);
    const runIds = `SELECT id FROM journey_runs WHERE environment_id = $1 AND user_hash = ANY($2::bytea[])`;
    const journeyMessages = await count(`DELETE FROM journey_messages WHERE run_id IN (${runIds})`, [env, hashes]);
    const journeyRuns = await count('DELETE FROM journey_runs WHERE environment_id = $1 AND user_hash = ANY($2::bytea[])', [env, hashes]);
    const identifyMessages =
      (await count('DELETE FROM identify_messages WHERE environment_id = $1 AND user_key = ANY($2::int8[])', [env, hashes.map(userKeyBits)])) +
      (await count('DELETE FROM identify_messages_legacy WHERE environment_id = $1 AND user_id = ANY($2::text[])', [env, eventUserIds]));

    let profiles = 0;
    let traits = 0;
    let userIds = 0;
    let addressClaims = 0;
    let consentDecisions = 0;
    let consentDecisionsKept = 0;
    let outboxEvents = 0;
    if (p !== null) {
      const { rows: claims } = await q<{ channel: string; value: string }>('SELECT DISTINCT channel, value FROM address_claims WHERE profile_id = $1', [p]);
      const { rows: elsewhere } = await q<{ channel: string; value: string }>(
        // One probe of the address index per value (a hash index answers `=`, not `= ANY`).
        `SELECT DISTINCT c.channel, c.value FROM unnest($1::text[]) AS v JOIN address_claims c ON c.value = v JOIN profiles o ON o.id = c.profile_id
          WHERE c.profile_id <> $2 AND o.environment_id = $3`,
        [claims.map((c) => c.value), p, env],
      );
      const removable = decisionsToRemove(claims, elsewhere);
      const kept = claims.length - removable.length;
      consentDecisions = await count(
        `DELETE FROM consent_decisions d USING unnest($2::text[], $3::bytea[]) AS a(channel, hash)
          WHERE d.environment_id = $1 AND d.channel = a.channel AND d.address_hash = a.hash`,
        [env, removable.map((a) => a.channel), removable.map((a) => hashStored(a.value))],
      );
      consentDecisionsKept = kept > 0 ? await keptDecisions(client, env, claims, removable) : 0;
      addressClaims = await count('DELETE FROM address_claims WHERE profile_id = $1', [p]);
      // The outbox holds no user column: its payload names the profile and the user ID.
      const needles = [`"profileId":${JSON.stringify(p)}`, ...person.userKeys.map((k) => `"userId":${JSON.stringify(fromPgText(k))}`)];
      outboxEvents = await count(
        `DELETE FROM outbox_events WHERE environment_id = $1 AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS n WHERE strpos(payload, n) > 0)`,
        [env, needles],
      );
      userIds = await count('DELETE FROM profile_users WHERE profile_id = $1', [p]);
      const { rows: gone } = await q<{ traits: number }>(
        `DELETE FROM profiles WHERE id = $1 RETURNING (SELECT count(*) FROM json_object_keys(fields::json))::int AS traits`,
        [p],
      );
      profiles = gone.length;
      traits = gone[0]?.traits ?? 0;
    }
    const removed = { profiles, traits, userIds, addressClaims, consentDecisions, events, journeyRuns, journeyMessages, identifyMessages, outboxEvents };

    // A tombstone for each user ID of the person: calls of any of them received up to now are dropped.
    await q(
      `INSERT INTO privacy_users (environment_id, user_hash, erased_at, suppressed_at)
       SELECT $1, h, $3::int8, CASE WHEN $4::bool THEN $3::int8 END FROM unnest($2::bytea[]) AS h
       ON CONFLICT (environment_id, user_hash) DO UPDATE
         SET erased_at = EXCLUDED.erased_at, suppressed_at = coalesce(privacy_users.suppressed_at, EXCLUDED.suppressed_at)`,
      [env, hashes, erasedAt, options.suppress],
    );
    await q(AUDIT_SQL, auditValues(env, userHash, 'forget', { ...removed, consentDecisionsKept }, options.operator));
    await q('COMMIT');
    const joinedUserIds = person.userKeys.filter((k) => k !== userKey).map(fromPgText);
    return { userHash: userHash.toString('hex'), erasedAt, suppressed: options.suppress, joinedUserIds, removed, consentDecisionsKept };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** How many decisions of the kept addresses exist (reported, so the operator knows some proof stays). */
async function keptDecisions(
  client: pg.PoolClient,
  env: string,
  claims: { channel: string; value: string }[],
  removable: { channel: string; value: string }[],
) {
  const gone = new Set(removable.map((a) => `${a.channel}\0${a.value}`));
  const kept = claims.filter((c) => !gone.has(`${c.channel}\0${c.value}`));
  const { rows } = await longQuery(client)<{ n: number }>(
    `SELECT count(*)::int AS n FROM consent_decisions d JOIN unnest($2::text[], $3::bytea[]) AS a(channel, hash)
       ON d.environment_id = $1 AND d.channel = a.channel AND d.address_hash = a.hash`,
    [env, kept.map((a) => a.channel), kept.map((a) => hashStored(a.value))],
  );
  return rows[0].n;
}

/** The locks of Identify's batches and of the journey engine, for each user ID, each kind in key order. */
async function lockUsers(client: pg.PoolClient, env: string, userKeys: string[]) {
  const identify = userKeys.map((k) => userLockKey(env, k)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const q = longQuery(client);
  await q('SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) AS k', [identify.map(String)]);
  await q(`SELECT pg_advisory_xact_lock(hashtextextended(k, 0)) FROM unnest($1::text[]) AS k ORDER BY hashtextextended(k, 0)`, [
    userKeys.map((k) => `journey:${env}:${k}`),
  ]);
}

// ---- the worker's guard --------------------------------------------------------------------

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
  const keys = envs.map(erasureLockKey).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
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
    pipe.query({ text: 'SELECT pg_advisory_xact_lock_shared(k) FROM unnest($1::int8[]) AS k', values: [keys.map(String)] });
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
