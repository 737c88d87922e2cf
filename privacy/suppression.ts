// Tombstones and suppressions (privacy_users) as the write paths read them, and the operator's
// suppress / unsuppress. The rule of what a row drops is rules.ts; this module is the
// SQL around it. Rows are keyed by the user ID's hash: no raw user ID is stored here.
import type pg from 'pg';
import type { Db, Tx } from '../platform/db.ts';
import { dropReason, type PrivacyState } from './rules.ts';
import { userHashOfKey } from '../profiles/person.ts';
import { AUDIT_SQL, auditValues, auditHashHex } from './audit.ts';

/** A privacy_users row as the write paths read it (bigint columns come back as text). */
export interface PrivacyRow {
  env: string;
  hash: string;
  erased_at: string | null;
  suppressed_at: string | null;
}

/**
 * privacy_users (as p) restricted to the users of ($p environments, $p+1 user hashes as hex):
 * usually no row (the table holds only erased or suppressed users).
 */
export const PRIVACY_OF_USERS = (p: number) => `privacy_users p
 WHERE p.user_hash = ANY(ARRAY(SELECT decode(h, 'hex') FROM unnest($${p + 1}::text[]) AS h)) AND p.environment_id = ANY($${p}::uuid[])`;

/** The rows of ($1 environment, $2 user hash as hex) pairs. */
export const PRIVACY_OF_USERS_SQL = `
SELECT p.environment_id::text AS env, encode(p.user_hash, 'hex') AS hash, p.erased_at::text, p.suppressed_at::text FROM ${PRIVACY_OF_USERS(1)}`;

/** `env:hash` → the state of that user. */
export function privacyStates(rows: readonly PrivacyRow[]): Map<string, PrivacyState> {
  const out = new Map<string, PrivacyState>();
  for (const r of rows) {
    out.set(`${r.env}:${r.hash}`, {
      erasedAt: r.erased_at === null ? null : Number(r.erased_at),
      suppressedAt: r.suppressed_at === null ? null : Number(r.suppressed_at),
    });
  }
  return out;
}

/** Whether a profile change of a user (stored form), made at `at`, is one an erasure or a suppression drops. */
export async function droppedChange(tx: Tx, environmentId: string, userKey: string, at: number): Promise<boolean> {
  const rows = await tx.$queryRaw<{ erasedAt: bigint | null; suppressedAt: bigint | null }[]>`
    SELECT erased_at AS "erasedAt", suppressed_at AS "suppressedAt" FROM privacy_users
     WHERE environment_id = ${environmentId}::uuid AND user_hash = ${userHashOfKey(userKey)}`;
  if (!rows.length) return false;
  const [r] = rows;
  return (
    dropReason({ erasedAt: r.erasedAt === null ? null : Number(r.erasedAt), suppressedAt: r.suppressedAt === null ? null : Number(r.suppressedAt) }, at) !==
    null
  );
}

/** Every suppressed user of every environment: environment id → user hash (hex) → suppressed since (ms). */
export async function loadSuppressions(pool: pg.Pool): Promise<Map<string, Map<string, number>>> {
  const { rows } = await pool.query<{ env: string; hash: string; since: string }>(
    `SELECT environment_id::text AS env, encode(user_hash, 'hex') AS hash, suppressed_at::text AS since FROM privacy_users WHERE suppressed_at IS NOT NULL`,
  );
  const out = new Map<string, Map<string, number>>();
  for (const r of rows) {
    let users = out.get(r.env);
    if (!users) out.set(r.env, (users = new Map()));
    users.set(r.hash, Number(r.since));
  }
  return out;
}

/** Adds dropped calls to the suppressed users' counts: one statement for any number of users. */
export async function addDropped(
  pool: pg.Pool | pg.PoolClient,
  counts: readonly { env: string; hash: string; identify: number; track: number }[],
): Promise<void> {
  if (!counts.length) return;
  await pool.query(
    `UPDATE privacy_users p SET dropped_identify = p.dropped_identify + c.identify, dropped_track = p.dropped_track + c.track
       FROM unnest($1::uuid[], $2::text[], $3::int8[], $4::int8[]) AS c(env, hash, identify, track)
      WHERE p.environment_id = c.env AND p.user_hash = decode(c.hash, 'hex')`,
    [counts.map((c) => c.env), counts.map((c) => c.hash), counts.map((c) => c.identify), counts.map((c) => c.track)],
  );
}

/**
 * Suppresses a user from now on (PostgreSQL's clock), or lifts it, with its audit record in the
 * same transaction when something changed. Suppressing a suppressed user keeps its first time
 * and counts. Returns the time the user is suppressed since (suppress) or of the change
 * (unsuppress), and whether anything changed.
 */
export async function setSuppressed(
  db: Db,
  environmentId: string,
  audit: { secret: Buffer; userHash: Buffer },
  on: boolean,
  operator: string,
): Promise<{ at: number; changed: boolean }> {
  const { userHash } = audit;
  return db.$transaction(async (tx) => {
    const [{ now }] = await tx.$queryRaw<{ now: bigint }[]>`SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::int8 AS now`;
    const at = Number(now);
    const changed =
      (on
        ? await tx.$executeRaw`
          INSERT INTO privacy_users (environment_id, user_hash, suppressed_at) VALUES (${environmentId}::uuid, ${userHash}, ${at})
          ON CONFLICT (environment_id, user_hash) DO UPDATE SET suppressed_at = ${at}, dropped_identify = 0, dropped_track = 0
          WHERE privacy_users.suppressed_at IS NULL`
        : await tx.$executeRaw`
          UPDATE privacy_users SET suppressed_at = NULL, dropped_identify = 0, dropped_track = 0
          WHERE environment_id = ${environmentId}::uuid AND user_hash = ${userHash} AND suppressed_at IS NOT NULL`) > 0;
    if (changed) await tx.$executeRawUnsafe(AUDIT_SQL, ...auditValues(environmentId, audit, on ? 'suppress' : 'unsuppress', {}, operator));
    if (!on) return { at, changed };
    const [row] = await tx.$queryRaw<{ since: bigint }[]>`
      SELECT suppressed_at AS since FROM privacy_users WHERE environment_id = ${environmentId}::uuid AND user_hash = ${userHash}`;
    return { at: Number(row.since), changed };
  });
}

export interface SuppressedUser {
  userHash: string;
  suppressedAt: number;
  dropped: { identify: number; track: number };
}

/** The suppressed users of an environment, each named by the audit's keyed hash (`secret`). */
export async function listSuppressed(db: Db, environmentId: string, secret: Buffer): Promise<SuppressedUser[]> {
  const rows = await db.privacyUser.findMany({ where: { environmentId, suppressedAt: { not: null } }, orderBy: { suppressedAt: 'asc' } });
  return rows.map((r) => ({
    userHash: auditHashHex(secret, Buffer.from(r.userHash)),
    suppressedAt: Number(r.suppressedAt),
    dropped: { identify: Number(r.droppedIdentify), track: Number(r.droppedTrack) },
  }));
}
