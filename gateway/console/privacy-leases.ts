// Leases of the admin API's privacy requests (privacy-requests.ts), so that a request whose
// dashboard process died is not left `running`: the process that runs a request holds a lease
// on its row (lease_owner, lease_until, PostgreSQL's clock) and renews it while it runs; every
// dashboard looks, at start and then periodically, for open requests (pending or running) whose
// lease ended, and claims them. A claim takes the rows with FOR UPDATE SKIP LOCKED and re-checks
// the lease on the row it locked, so two dashboards never both claim one request: each lease has
// one owner at a time. Kept apart from privacy-requests.ts (which loads the operator commands'
// code) so that the dashboard's periodic look costs one small query.
import { poolOf, type Db } from '../../platform/db.ts';

/** Runs of a request at most (each claim counts one, a dashboard killed under it included); past them it fails. */
export const PRIVACY_ATTEMPTS = 3;

/** A request as claimed: what is needed to run it again. */
export interface ClaimedRequest {
  id: string;
  environmentId: string;
  action: string;
  operator: string;
  /** Null for a request made before requests kept their user ID: it cannot be run again. */
  userId: string | null;
  suppress: boolean;
  /** Runs started, this one included. */
  attempts: number;
  /** The last failed run's error, if any. */
  error: string | null;
}

const RETURNING = `RETURNING id::text AS id, environment_id::text AS "environmentId", action, operator, user_id AS "userId", suppress, attempts, error`;
const leaseEnd = `now() + $2::int8 * interval '1 millisecond'`;

/** Whether any open request's lease has ended (or it never had one): the dashboard's cheap look before it loads the requests' code. */
export async function anyClaimable(db: Db): Promise<boolean> {
  const { rowCount } = await poolOf(db).query(
    `SELECT 1 FROM privacy_requests WHERE status IN ('pending', 'running') AND (lease_until IS NULL OR lease_until < now()) LIMIT 1`,
  );
  return Boolean(rowCount);
}

/** Claims up to `limit` open requests whose lease ended, oldest first, for `owner` for `leaseMs`: each counts a run started. */
export async function claimExpired(db: Db, owner: string, leaseMs: number, limit: number): Promise<ClaimedRequest[]> {
  const { rows } = await poolOf(db).query<ClaimedRequest>(
    `UPDATE privacy_requests r
        SET status = 'running', lease_owner = $1, lease_until = ${leaseEnd}, attempts = r.attempts + 1, started_at = coalesce(r.started_at, now())
      WHERE r.id IN (SELECT id FROM privacy_requests
                      WHERE status IN ('pending', 'running') AND (lease_until IS NULL OR lease_until < now())
                      ORDER BY created_at LIMIT $3 FOR UPDATE SKIP LOCKED)
      ${RETURNING}`,
    [owner, leaseMs, limit],
  );
  return rows;
}

/** Starts a run of request `id` that `owner` holds the lease of (one it just made): null when it holds it no more. */
export async function startOwn(db: Db, id: string, owner: string, leaseMs: number): Promise<ClaimedRequest | null> {
  const { rows } = await poolOf(db).query<ClaimedRequest>(
    `UPDATE privacy_requests r
        SET status = 'running', lease_until = ${leaseEnd}, attempts = r.attempts + 1, started_at = coalesce(r.started_at, now())
      WHERE r.id = $3 AND r.lease_owner = $1 AND r.status IN ('pending', 'running')
      ${RETURNING}`,
    [owner, leaseMs, id],
  );
  return rows[0] ?? null;
}

/** Renews `owner`'s leases of requests `ids` still running; answers the ids it still holds (a lease another claimed after it ended is lost). */
export async function renewLeases(db: Db, ids: string[], owner: string, leaseMs: number): Promise<string[]> {
  if (!ids.length) return [];
  const { rows } = await poolOf(db).query<{ id: string }>(
    `UPDATE privacy_requests SET lease_until = ${leaseEnd} WHERE id = ANY($3::uuid[]) AND lease_owner = $1 AND status = 'running' RETURNING id::text AS id`,
    [owner, leaseMs, ids],
  );
  return rows.map((r) => r.id);
}

/**
 * Ends a run of `owner`'s: `succeeded` or `failed` for good (the user ID and the lease are
 * cleared), or `retry`: back to pending with the run's error, claimable by any dashboard once
 * `leaseMs` passed. False when `owner` no longer held the lease (another dashboard claimed the
 * request and records its own run).
 */
export async function endRun(
  db: Db,
  id: string,
  owner: string,
  leaseMs: number,
  end: { status: 'succeeded'; result: string } | { status: 'failed'; error: string } | { status: 'retry'; error: string },
): Promise<boolean> {
  const pool = poolOf(db);
  if (end.status === 'retry') {
    const { rowCount } = await pool.query(
      `UPDATE privacy_requests SET status = 'pending', error = $3, lease_owner = NULL, lease_until = ${leaseEnd} WHERE id = $4 AND lease_owner = $1`,
      [owner, leaseMs, end.error, id],
    );
    return Boolean(rowCount);
  }
  const { rowCount } = await pool.query(
    `UPDATE privacy_requests
        SET status = $2, finished_at = now(), result = $3, error = $4, user_id = NULL, lease_owner = NULL, lease_until = NULL
      WHERE id = $5 AND lease_owner = $1 AND status IN ('pending', 'running')`,
    [owner, end.status, end.status === 'succeeded' ? end.result : null, end.status === 'failed' ? end.error : null, id],
  );
  return Boolean(rowCount);
}
