// Erasing a person (intake users forget). The worker's side, which keeps queued events of an
// erased person out of the events table, is events/erasure-guard.ts.
//
// Why nothing comes back. The erasure runs in one transaction that takes its locks in
// person.ts's order before it reads what to remove: the environment's lock exclusively, the
// erased user ID's lock and its profile's joinable email's, the profile row, then the consent
// locks of its addresses.
// Only then does it read who the person is (every user ID joined to the profile), write the
// tombstones (privacy_users.erased_at, PostgreSQL's clock) and delete.
// - A worker stores a batch, and the journey engine changes a person's runs, while holding that
//   environment lock shared, and read the tombstones after taking it: a batch either committed
//   before the erasure took the lock (and the erasure deletes its rows), or reads the tombstone
//   and drops the events received up to its time.
// - An Identify batch locks every profile it writes, so no user ID joins the person's profile
//   while it is erased: a call that would have joined it finds it gone once the erasure commits
//   and reads the tombstones again (identify-batch.ts retries a changed snapshot). The erased
//   user ID's own lock keeps its first profile from appearing beside the erasure.
// The erasure holds a fixed number of locks however many user IDs the person has.
import type pg from 'pg';
import { isWriteConflict, retrying, withQueryTimeout } from '../platform/db.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { fromPgText } from '../platform/pg-text.ts';
import { decisionsToRemove, userKeyBits } from './rules.ts';
import {
  addressConsentLocks,
  emailLock,
  environmentLock,
  LOCK_SQL,
  lockParam,
  sortedLocks,
  userHashOf,
  userHashOfKey,
  userKeyOf,
  userLock,
} from '../profiles/person.ts';
import { AUDIT_SQL, auditHashHex, auditValues } from './audit.ts';

/** How long an erasure may take, its lock waits included (the pool's bound is for requests). */
const ERASURE_TIMEOUT_MS = 300_000;

/** Tries of an erasure that met a deadlock (a join that locked the profile it moved to first). */
const ERASURE_ATTEMPTS = 5;

export interface ForgetOptions {
  environmentId: string;
  userId: string;
  suppress: boolean;
  operator: string;
  /** The deployment's secret of the audit's user hashes (audit.ts readAuditSecret). */
  auditSecret: Buffer;
}

/** What `intake users forget` removed, counted per kind. */
export interface ForgetSummary {
  /** The audit's keyed hash of the user ID. */
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
  /** Consent decisions of the person's addresses that another profile holds now: kept. */
  consentDecisionsKept: number;
}

/** What the erasure removed that Redis may still hold a copy of (events/forget-queued.ts): the ids of the outbox rows it deleted. */
export interface ForgetOutcome extends ForgetSummary {
  outboxIds: string[];
}

/** Queries on `client` bounded by ERASURE_TIMEOUT_MS on the client's side too (the pool's bound is for requests). */
function longQuery(client: pg.PoolClient) {
  return <R extends pg.QueryResultRow>(text: string, values?: unknown[]) => client.query<R>(withQueryTimeout({ text, values }, ERASURE_TIMEOUT_MS));
}

type Query = ReturnType<typeof longQuery>;

/** A DELETE's count of rows. */
const rowsDeleted = (q: Query) => async (text: string, values: unknown[]) => (await q(text, values)).rowCount ?? 0;

const msNow = `floor(extract(epoch FROM clock_timestamp()) * 1000)::int8`;

/**
 * Removes everything held about the person in one transaction (see the top of this file for
 * why it takes its locks first). A deadlock runs it again, after a pause with jitter.
 */
export function forgetUser(pool: pg.Pool, options: ForgetOptions): Promise<ForgetOutcome> {
  return retrying(() => forgetOnce(pool, options), ERASURE_ATTEMPTS, isWriteConflict, 50);
}

/**
 * The profile the user key reads, locked (lock order 3), or null when it has none. A profile
 * joined into another before the lock was granted is gone by then: the user's row points at
 * the one it joined, which is locked next.
 */
async function lockProfileOf(q: Query, env: string, userKey: string): Promise<string | null> {
  // Each turn follows one join that committed meanwhile; Identify retries a batch that raced as many.
  for (let turn = 0; turn < 10; turn++) {
    const { rows } = await q<{ profile_id: string }>(`SELECT u.profile_id::text FROM profile_users u WHERE u.environment_id = $1 AND u.user_hash = $2`, [
      env,
      userHashOfKey(userKey),
    ]);
    if (!rows.length) return null;
    const locked = await q('SELECT 1 FROM profiles WHERE id = $1 FOR UPDATE', [rows[0].profile_id]);
    if (locked.rowCount) return rows[0].profile_id;
  }
  throw new Error('the profile kept being joined into another while the erasure locked it: run the command again');
}

async function forgetOnce(pool: pg.Pool, options: ForgetOptions): Promise<ForgetOutcome> {
  const { environmentId: env, userId } = options;
  const userKey = userKeyOf(userId);
  const client = await pool.connect();
  const q = longQuery(client);
  try {
    await q(`BEGIN; SET LOCAL statement_timeout = ${ERASURE_TIMEOUT_MS}; SET LOCAL lock_timeout = ${ERASURE_TIMEOUT_MS}`);
    await q(LOCK_SQL, [lockParam([environmentLock(env)])]);
    // The profile's joinable email too: calls that would join it then queue behind the erasure
    // here rather than ahead of it at the profile's row. The row lock alone keeps the result
    // right should the email change meanwhile.
    const { rows: joined } = await q<{ email: string | null }>(
      `SELECT p.email FROM profile_users u JOIN profiles p ON p.id = u.profile_id WHERE u.environment_id = $1 AND u.user_hash = $2`,
      [env, userHashOfKey(userKey)],
    );
    const email = joined[0]?.email ?? null;
    await q(LOCK_SQL, [lockParam(sortedLocks([userLock(env, userKey), ...(email === null ? [] : [emailLock(env, email)])]))]);
    const p = await lockProfileOf(q, env, userKey);
    // Under the profile's lock nobody joins it or leaves it: these are all its user IDs.
    const members = p === null ? [] : (await q<{ user_id: string }>('SELECT user_id FROM profile_users WHERE profile_id = $1', [p])).rows.map((r) => r.user_id);
    const userKeys = [...new Set([userKey, ...members])].sort();
    const hashes = userKeys.map(userHashOfKey);
    const { rows: clock } = await q<{ now: string }>(`SELECT ${msNow}::text AS now`);
    const erasedAt = Number(clock[0].now);
    const count = rowsDeleted(q);

    const events = await forgetEvents(q, env, userKeys);
    const runIds = `SELECT id FROM journey_runs WHERE environment_id = $1 AND user_hash = ANY($2::bytea[])`;
    const journeyMessages = await count(`DELETE FROM journey_messages WHERE run_id IN (${runIds})`, [env, hashes]);
    const journeyRuns = await count('DELETE FROM journey_runs WHERE environment_id = $1 AND user_hash = ANY($2::bytea[])', [env, hashes]);
    const identifyMessages =
      (await count('DELETE FROM identify_messages WHERE environment_id = $1 AND user_key = ANY($2::int8[])', [
        env,
        hashes.map((h) => userKeyBits(h.toString('hex'))),
      ])) + (await count('DELETE FROM identify_messages_legacy WHERE environment_id = $1 AND user_id = ANY($2::text[])', [env, userKeys]));

    const fromProfile = p === null ? NO_PROFILE : await forgetProfile(q, env, p, hashes);
    const outboxIds = fromProfile.outboxIds;
    const removed = {
      profiles: fromProfile.profiles,
      traits: fromProfile.traits,
      userIds: fromProfile.userIds,
      addressClaims: fromProfile.addressClaims,
      consentDecisions: fromProfile.consentDecisions,
      events,
      journeyRuns,
      journeyMessages,
      identifyMessages,
      outboxEvents: outboxIds.length,
    };
    const consentDecisionsKept = fromProfile.consentDecisionsKept;

    // A tombstone for each user ID of the person: calls of any of them received up to now are dropped.
    await q(
      `INSERT INTO privacy_users (environment_id, user_hash, erased_at, suppressed_at)
       SELECT $1, h, $3::int8, CASE WHEN $4::bool THEN $3::int8 END FROM unnest($2::bytea[]) AS h
       ON CONFLICT (environment_id, user_hash) DO UPDATE
         SET erased_at = EXCLUDED.erased_at, suppressed_at = coalesce(privacy_users.suppressed_at, EXCLUDED.suppressed_at)`,
      [env, hashes, erasedAt, options.suppress],
    );
    const audit = { secret: options.auditSecret, userHash: userHashOf(userId) };
    await q(AUDIT_SQL, auditValues(env, audit, 'forget', { ...removed, consentDecisionsKept }, options.operator));
    await q('COMMIT');
    const joinedUserIds = userKeys.filter((k) => k !== userKey).map(fromPgText);
    return {
      userHash: auditHashHex(audit.secret, audit.userHash),
      erasedAt,
      suppressed: options.suppress,
      joinedUserIds,
      removed,
      consentDecisionsKept,
      outboxIds,
    };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}

/** What the erasure removed of the person's profile, its address history, consent and outbox rows. */
interface ProfileRemoved {
  profiles: number;
  traits: number;
  userIds: number;
  addressClaims: number;
  consentDecisions: number;
  consentDecisionsKept: number;
  outboxIds: string[];
}

const NO_PROFILE: ProfileRemoved = { profiles: 0, traits: 0, userIds: 0, addressClaims: 0, consentDecisions: 0, consentDecisionsKept: 0, outboxIds: [] };

/** Removes the locked profile `p` and what hangs off it; `hashes`: the user hashes of every user ID that reads it. */
async function forgetProfile(q: Query, env: string, p: string, hashes: Buffer[]): Promise<ProfileRemoved> {
  const count = rowsDeleted(q);
  const { removed: consentDecisions, kept: consentDecisionsKept } = await forgetDecisions(q, env, p);
  const addressClaims = await count('DELETE FROM address_claims WHERE profile_id = $1', [p]);
  // Each outbox row carries the hash of the user whose call wrote it; a user never leaves
  // its profile, so the rows of the person's user IDs include every row naming the profile.
  const { rows: outbox } = await q<{ id: string }>(`DELETE FROM outbox_events WHERE environment_id = $1 AND user_hash = ANY($2::bytea[]) RETURNING id::text`, [
    env,
    hashes,
  ]);
  const userIds = await count('DELETE FROM profile_users WHERE profile_id = $1', [p]);
  const { rows: gone } = await q<{ traits: number }>(
    `DELETE FROM profiles WHERE id = $1 RETURNING (SELECT count(*) FROM json_object_keys(fields::json))::int AS traits`,
    [p],
  );
  return {
    profiles: gone.length,
    traits: gone[0]?.traits ?? 0,
    userIds,
    addressClaims,
    consentDecisions,
    consentDecisionsKept,
    outboxIds: outbox.map((r) => r.id),
  };
}

/**
 * The person's stored events, in every spelling of a user ID that trims to one of theirs
 * (events/event-store.ts keeps the ID as sent, with the trimmed key beside a padded one), with their
 * messageId identities: a resend after the erasure is new data, as it is for Identify.
 */
async function forgetEvents(q: Query, env: string, userKeys: string[]): Promise<number> {
  const { rows } = await q<{ n: number }>(
    `WITH gone AS (
       DELETE FROM events WHERE environment_id = $1 AND (user_id = ANY($2::text[]) OR user_key = ANY($2::text[]))
       RETURNING message_hash, received_at),
     identities AS (
       DELETE FROM event_ids i USING gone WHERE i.environment_id = $1 AND i.message_hash = gone.message_hash AND i.received_at = gone.received_at)
     SELECT count(*)::int AS n FROM gone`,
    [env, userKeys],
  );
  return rows[0].n;
}

/**
 * Removes the consent decisions of the profile's addresses that no other profile holds now, under
 * their consent locks (lock order 4): an Identify deciding on one of them waits, then decides anew.
 */
async function forgetDecisions(q: Query, env: string, profileId: string): Promise<{ removed: number; kept: number }> {
  const { rows: claims } = await q<{ channel: string; value: string }>('SELECT DISTINCT channel, value FROM address_claims WHERE profile_id = $1', [profileId]);
  const addresses = claims.filter((c) => c.value !== '');
  const locks = addresses.flatMap((a) => addressConsentLocks(env, a.channel, fromPgText(a.value)));
  await q(LOCK_SQL, [lockParam(sortedLocks(locks))]);
  const { rows: heldElsewhere } = await q<{ channel: string; value: string }>(
    // One probe of the address index per value (a hash index answers `=`, not `= ANY`); a claim
    // counts when it is its profile's latest of that channel (as addressAsOf reads "now").
    `SELECT DISTINCT c.channel, c.value FROM unnest($1::text[]) AS v JOIN address_claims c ON c.value = v JOIN profiles o ON o.id = c.profile_id
      WHERE c.profile_id <> $2 AND o.environment_id = $3
        AND NOT EXISTS (SELECT 1 FROM address_claims l WHERE l.profile_id = c.profile_id AND l.channel = c.channel AND (l.at, l.id) > (c.at, c.id))`,
    [addresses.map((c) => c.value), profileId, env],
  );
  const removable = decisionsToRemove(addresses, heldElsewhere);
  const byAddress = (list: { channel: string; value: string }[]) => [env, list.map((a) => a.channel), list.map((a) => hashStored(a.value))];
  const { rowCount } = await q(
    `DELETE FROM consent_decisions d USING unnest($2::text[], $3::bytea[]) AS a(channel, hash)
      WHERE d.environment_id = $1 AND d.channel = a.channel AND d.address_hash = a.hash`,
    byAddress(removable),
  );
  const gone = new Set(removable.map((a) => `${a.channel}\0${a.value}`));
  const kept = addresses.filter((a) => !gone.has(`${a.channel}\0${a.value}`));
  if (!kept.length) return { removed: rowCount ?? 0, kept: 0 };
  const { rows } = await q<{ n: number }>(
    `SELECT count(*)::int AS n FROM consent_decisions d JOIN unnest($2::text[], $3::bytea[]) AS a(channel, hash)
       ON d.environment_id = $1 AND d.channel = a.channel AND d.address_hash = a.hash`,
    byAddress(kept),
  );
  return { removed: rowCount ?? 0, kept: rows[0].n };
}
