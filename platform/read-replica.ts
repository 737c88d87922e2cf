// Profiles reads from a PostgreSQL streaming replica (DATABASE_READ_URL). The specification lets a
// Profiles read trail an update ("about a minute"), so reads may go to a replica as long as it
// answers and trails the primary by at most READ_REPLICA_MAX_LAG_MS; otherwise they go to the
// primary. Once a second, off the request path, the primary's WAL position is read, then the
// replica's replay position: a replica that has replayed up to the position read just before
// holds everything the primary held then, and trails by nothing however long the primary has been
// idle. Only positions the primary wrote and the replica replayed are compared. What describes
// the replica's WAL receiver does not say what it holds: after a restart pg_last_wal_receive_lsn()
// reads as the start of the WAL segment it streams from until something new arrives, and a
// replica cut off from an idle primary still holds all of it.
import pg from 'pg';
import type { Logger } from './logger.ts';
import { onConnectionLost } from './db.ts';

/**
 * Byte positions in the WAL, as text: pg_lsn less 0/0 is a numeric, beyond a float's exact range.
 * The primary's write position, not its insert position: that one can stand past a page header
 * that no replay position ever reaches (after a segment switch, say), and would show an idle
 * replica that holds everything as behind.
 */
export const PRIMARY_POSITION_SQL = `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS lsn`;

export const REPLICA_STATE_SQL = `SELECT pg_is_in_recovery() AS standby,
  (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::text AS replay_lsn,
  (EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS since_replay_ms`;

/** One reading of the replica (REPLICA_STATE_SQL). */
export interface ReplicaState {
  /** pg_is_in_recovery(): false for a server that is not a standby (it reads its own writes). */
  standby: boolean;
  /** pg_last_wal_replay_lsn(), the end of the last WAL record it replayed; null when it has none. */
  replayLsn: bigint | null;
  /**
   * Since the commit, on the primary, of the last transaction it replayed, in ms (its own clock
   * against the primary's); null when it has replayed none since it started.
   */
  sinceReplayMs: number | null;
}

/** The primary's WAL write position (pg_current_wal_lsn()) and when it was read (performance.now()). */
export interface PrimaryPosition {
  lsn: bigint;
  at: number;
}

/**
 * Readings kept of positions the replica has not replayed yet. A replica that stays behind a busy
 * primary for longer thins them out: each dropped reading moves the bound of `lag` to an earlier
 * one, so it can only grow, never claim less than the replica trails.
 */
const POSITIONS_KEPT = 600;

export interface LagClock {
  /**
   * How far the replica trails the primary, in ms, from the primary's position read just before
   * (null when the primary did not answer) and the replica's state read `now`. 0 when the replica
   * has replayed that position. Otherwise the smaller of two bounds, each a time at which the
   * primary held nothing the replica lacks now: the last reading of the primary at a position the
   * replica has since replayed (tight while the primary writes now and then), and the commit of
   * the last transaction it replayed (tight while the primary commits all the time). Infinity
   * when neither is known. A server that is not a standby trails by nothing.
   */
  lag(primary: PrimaryPosition | null, replica: ReplicaState, now: number): number;
}

export function createLagClock(): LagClock {
  // Readings of the primary at positions the replica had not replayed at its last reading, oldest
  // first, one per position (the latest time the primary was read there).
  let ahead: PrimaryPosition[] = [];
  // When the primary was last read at a position the replica has replayed.
  let heldAt: number | null = null;
  return {
    lag(primary, replica, now) {
      if (!replica.standby) {
        ahead = [];
        return 0;
      }
      if (primary) {
        const last = ahead.at(-1);
        if (last && last.lsn === primary.lsn) last.at = primary.at;
        else if (!last || primary.lsn > last.lsn) ahead.push({ ...primary });
      }
      const replayed = replica.replayLsn;
      if (replayed !== null) while (ahead.length > 0 && ahead[0].lsn <= replayed) heldAt = ahead.shift()!.at;
      if (primary && replayed !== null && replayed >= primary.lsn) return 0;
      if (ahead.length > POSITIONS_KEPT) ahead = ahead.filter((_, i) => i % 2 === 0 || i === ahead.length - 1);
      const sinceHeld = heldAt === null ? Infinity : now - heldAt;
      return Math.max(0, Math.min(sinceHeld, replica.sinceReplayMs ?? Infinity));
    },
  };
}

export interface ReadRoute {
  /** The pool the next read goes to: the replica while it is fit, else the primary. */
  pool(): pg.Pool;
  /** A read on the replica failed: reads go to the primary until a reading shows it fit again. */
  failed(): void;
  /** How far the replica trailed the primary at the last reading, in seconds; null when there is no replica, it did not answer, or that is not known. */
  lagSeconds(): number | null;
  /** Whether reads go to the replica now. */
  usingReplica(): boolean;
  close(): Promise<void>;
}

/** How often the replica's lag is read, and how old a reading may be before it no longer counts. */
export const REPLICA_CHECK_MS = 1000;
const READING_VALID_MS = 3 * REPLICA_CHECK_MS;

/**
 * Profiles' pool: `primary` when no replica URL is given; otherwise a pool on the replica
 * (`poolSize` connections) used while the last reading, at most READING_VALID_MS old, shows a
 * lag of at most `maxLagMs`.
 */
export function createReadRoute(options: { primary: pg.Pool; replicaUrl: string; maxLagMs: number; poolSize: number; log: Logger }): ReadRoute {
  const { primary, replicaUrl, maxLagMs, log } = options;
  if (!replicaUrl) {
    return { pool: () => primary, failed() {}, lagSeconds: () => null, usingReplica: () => false, close: async () => {} };
  }
  const replica = new pg.Pool({
    connectionString: replicaUrl,
    max: options.poolSize,
    // A replica that is down is noticed within a second, and the read goes to the primary.
    connectionTimeoutMillis: 1000,
    query_timeout: 5000,
    statement_timeout: 5000,
    keepAlive: true,
  });
  onConnectionLost(replica, log, 'read replica connection lost');
  let lagMs: number | null = null;
  let readAt = -Infinity;
  let fit = false;
  let reading: Promise<void> | null = null;

  const settle = (nowFit: boolean) => {
    if (nowFit !== fit)
      log.info({ lagMs, maxLagMs }, nowFit ? 'Profiles read from the replica' : 'Profiles read from the primary: the replica is down or lags');
    fit = nowFit;
  };
  const clock = createLagClock();
  async function primaryPosition(): Promise<PrimaryPosition | null> {
    try {
      const { rows } = await primary.query<{ lsn: string }>(PRIMARY_POSITION_SQL);
      return { lsn: BigInt(rows[0].lsn), at: performance.now() };
    } catch {
      // The replica is then measured against the primary's earlier readings: its lag grows from the last one it reached.
      return null;
    }
  }
  async function read() {
    const position = await primaryPosition();
    try {
      const { rows } = await replica.query<{ standby: boolean; replay_lsn: string | null; since_replay_ms: number | null }>(REPLICA_STATE_SQL);
      const [row] = rows;
      const state = { standby: row.standby, replayLsn: row.replay_lsn === null ? null : BigInt(row.replay_lsn), sinceReplayMs: row.since_replay_ms };
      readAt = performance.now();
      lagMs = clock.lag(position, state, readAt);
      settle(lagMs <= maxLagMs);
    } catch {
      lagMs = null;
      settle(false);
    }
  }
  const refresh = () => {
    reading ??= read().finally(() => (reading = null));
  };
  refresh();
  const timer = setInterval(refresh, REPLICA_CHECK_MS);
  timer.unref();
  const current = () => fit && performance.now() - readAt <= READING_VALID_MS;
  return {
    pool: () => (current() ? replica : primary),
    failed: () => settle(false),
    lagSeconds: () => (lagMs === null || !Number.isFinite(lagMs) ? null : lagMs / 1000),
    usingReplica: current,
    async close() {
      clearInterval(timer);
      await reading;
      await replica.end();
    },
  };
}
