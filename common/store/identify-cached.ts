// Identify's cached path: a batch whose profiles this gateway holds (profile-cache.ts) is
// planned from them and written in ONE round trip: BEGIN, one statement, COMMIT, sent back to
// back (pipeline.ts). The statement claims the messageIds and updates each profile only if its
// row is still at the cached version (xmin), with the batch's address history and outbox
// rows. A messageId claimed before fails it (23505), so does a profile changed since (40001,
// the migration's intake_assert_current), and the COMMIT behind it rolls the whole batch back.
// The caller then runs the locked path (identify-batch.ts), which reads and locks what is
// stored, so its answers (a duplicate, a conflict, a change another gateway made) are the
// stored truth.
// Measured (README, Performance): the locked path's two round trips, its advisory locks and
// the profile rows it reads back were most of an Identify batch's time.
import type pg from 'pg';
import { queryTimeoutFor } from '../db.ts';
import { Pipeline } from '../pipeline.ts';
import type { CachedSnapshot } from './profile-cache.ts';
import type { IdentifyCall, Plan } from './identify-plan.ts';
import {
  addressClaimAndOutboxValues,
  carriedChars,
  claimValues,
  compare,
  INSERT_ADDRESS_CLAIMS_AND_OUTBOX,
  INSERT_CLAIMS,
  iso,
  largeStatementBound,
  messageClaims,
} from './identify-rows.ts';

const CACHED_WRITE_SQL = `
WITH
claims AS (${INSERT_CLAIMS(1, 'fail')}),
updated AS (
  UPDATE profiles p SET fields = t.fields, trait_times = t.times, updated_at = t.updated_at, email = t.email
  FROM unnest($4::uuid[], $5::xid[], $6::text[], $7::text[], $8::timestamptz[], $9::text[]) AS t(id, version, fields, times, updated_at, email)
  WHERE p.id = t.id AND p.xmin = t.version
  RETURNING 1),
${INSERT_ADDRESS_CLAIMS_AND_OUTBOX(10)}
SELECT intake_assert_current((SELECT count(*) FROM updated) = cardinality($4::uuid[])) AS ok,
  pg_current_xact_id()::xid::text AS version`;

/**
 * Whether the one statement writes all the plan holds: profile updates, claims and outbox rows.
 * A plan from the cache always does (every user is known, nothing joins, no consent); one that
 * did not would take the locked path.
 */
export function fitsCachedWrite(plan: Plan): boolean {
  return plan.profiles.every((p) => !p.isNew) && !plan.moved.length && !plan.users.length && !plan.decisions.length;
}

/**
 * Writes a plan made from `cached` (fitsCachedWrite) and commits, in one round trip; resolves with the
 * transaction's id (the profiles' new version). Rejects when the cache was stale (40001 from
 * intake_assert_current) or PostgreSQL refused the batch: nothing was written, the connection
 * is out of its transaction.
 */
export async function writeCached(client: pg.PoolClient, calls: IdentifyCall[], cached: CachedSnapshot, plan: Plan): Promise<string> {
  // In id order, as the locked path locks them.
  const profiles = [...plan.profiles].sort((x, y) => compare(x.id, y.id));
  const ms = queryTimeoutFor(carriedChars(plan));
  const pipe = new Pipeline(client);
  pipe.query({ text: `BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; ${largeStatementBound(ms)}` });
  const write = pipe.query<{ version: string }>(
    {
      name: 'identify-cached-write',
      text: CACHED_WRITE_SQL,
      values: [
        ...claimValues(messageClaims(calls).sorted),
        profiles.map((p) => p.id),
        profiles.map((p) => cached.versions.get(p.id)),
        profiles.map((p) => p.fields),
        profiles.map((p) => p.times),
        profiles.map((p) => iso(p.updatedAt)),
        profiles.map((p) => p.email),
        ...addressClaimAndOutboxValues(plan),
      ],
    },
    ms,
  );
  pipe.query({ text: 'COMMIT' });
  await pipe.done();
  return (await write).rows[0].version;
}
