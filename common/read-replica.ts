// Profiles reads from a PostgreSQL streaming replica (DATABASE_READ_URL). The specification lets a
// Profiles read trail an update ("about a minute"), so reads may go to a replica as long as it is
// up and its replay lag stays under READ_REPLICA_MAX_LAG_MS; otherwise they go to the primary.
// The lag is read on the replica once a second, off the request path, never per read.
import pg from 'pg';
import type { Logger } from './logger.ts';
import { onConnectionLost } from './db.ts';

/** One reading of the replica's state (REPLICA_STATE_SQL). */
export interface ReplicaState {
  /** pg_is_in_recovery(): false for a server that is not a standby (it reads its own writes). */
  standby: boolean;
  /** The WAL receiver's status (`streaming` while connected to the primary), null when none runs. */
  receiver: string | null;
  /** Everything received has been replayed. */
  caughtUp: boolean | null;
  /** Since the last transaction replayed, in ms; null before any. */
  sinceReplayMs: number | null;
}

export const REPLICA_STATE_SQL = `SELECT pg_is_in_recovery() AS standby,
  (SELECT status FROM pg_stat_wal_receiver) AS receiver,
  pg_last_wal_receive_lsn() = pg_last_wal_replay_lsn() AS caught_up,
  (EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp()) * 1000)::float8 AS since_replay_ms`;

/**
 * How far the replica trails the primary, in ms. Streaming and everything received replayed: 0
 * (an idle primary sends nothing, so the time since the last replayed transaction says nothing
 * then). Otherwise the time since the last replayed transaction: a replay that is behind, or a
 * replica cut off from its primary, counts as trailing by all of it. Infinity when it has
 * replayed nothing yet. A server that is not a standby trails by nothing.
 */
export function replicaLagMs(state: ReplicaState): number {
  if (!state.standby) return 0;
  if (state.receiver === 'streaming' && state.caughtUp) return 0;
  return state.sinceReplayMs ?? Infinity;
}

export interface ReadRoute {
  /** The pool the next read goes to: the replica while it is fit, else the primary. */
  pool(): pg.Pool;
  /** A read on the replica failed: reads go to the primary until a reading shows it fit again. */
  failed(): void;
  /** The replica's lag at the last reading in seconds; null when there is no replica or it did not answer. */
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
  async function read() {
    try {
      const { rows } = await replica.query<{ standby: boolean; receiver: string | null; caught_up: boolean | null; since_replay_ms: number | null }>(
        REPLICA_STATE_SQL,
      );
      const [row] = rows;
      lagMs = replicaLagMs({ standby: row.standby, receiver: row.receiver, caughtUp: row.caught_up, sinceReplayMs: row.since_replay_ms });
      readAt = performance.now();
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
