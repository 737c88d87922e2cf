// The storage maintenance a worker runs every STORAGE_MAINTENANCE_MS: partitions of events made
// EVENT_PARTITIONS_AHEAD_DAYS ahead, partitions past EVENTS_RETENTION_DAYS dropped whole,
// Identify's messageId records past IDENTIFY_IDEMPOTENCY_DAYS, address history past
// ADDRESS_HISTORY_DAYS and old relayed outbox rows removed in small batches, a
// pre-partitioning events table moved over. One worker at a time across all
// of them (an advisory lock held by one connection, tried, never waited for); every worker reads the
// storage figures for its metrics, whoever ran the round.
import type pg from 'pg';
import type { Config } from '../platform/config.ts';
import { historyRemovalHorizon } from '../identify/history-retention.ts';
import { DAY_MS, daysAhead, daysPastRetention, daysToCreate } from '../events/partition-plan.ts';
import type { Logger } from '../platform/logger.ts';
import type { TrustedClock } from '../platform/trusted-clock.ts';
import { startPollLoop, type PollLoop } from '../platform/poll-loop.ts';
import {
  createEventPartitions,
  dropEventPartition,
  eventPartitions,
  moveLegacyEvents,
  oldestEventIn,
  removeAddressClaims,
  removeIdentifyMessages,
  removeRelayedOutbox,
  STORAGE_MAINTENANCE_LOCK,
  tableBytes,
  type ClaimsCursor,
  type DropTiming,
} from '../events/storage.ts';

export interface StorageFigures {
  partitions: number;
  partitionsAheadDays: number;
  /** Bytes per table (events: all its partitions, with indexes). */
  bytes: Record<string, number>;
  /** Received time of the oldest stored event, null when none. */
  oldestEventAt: number | null;
}

export interface MaintenanceRound {
  /** False when another worker held the maintenance lock (this one did nothing but read). */
  ran: boolean;
  created: string[];
  dropped: DropTiming[];
  identifyMessagesRemoved: number;
  addressClaimsRemoved: number;
  outboxRemoved: number;
  legacyMoved: number;
  /** Whether the round stopped with work left (it runs again at once). */
  more: boolean;
}

type Settings = Pick<Config, 'eventsRetentionDays' | 'eventPartitionsAheadDays' | 'identifyIdempotencyDays' | 'addressHistoryDays' | 'storageMaintenanceMs'>;

/**
 * A worker's pass over address_claims (every row is looked at: a claim becomes removable as the
 * horizon passes a newer one, wherever it is). Rounds go on from where the last stopped; a new
 * pass starts a day after the last one ended: a claim that goes a day later changes no answer,
 * since the gateways stop reading it at the horizon already.
 */
export interface HistoryPass {
  after: ClaimsCursor | null;
  endedAt: number;
}
export const newHistoryPass = (): HistoryPass => ({ after: null, endedAt: -Infinity });

/** The tables whose bytes are exported. */
export const STORAGE_TABLES = ['events', 'event_ids', 'identify_messages', 'address_claims', 'outbox_events', 'consent_decisions'] as const;

/**
 * One round, if this connection gets the lock. Each kind of work is bounded by the round's time
 * budget (half the interval), so a round ends and lets go of the lock; what is left reports `more`.
 */
export async function maintenanceRound(
  pool: pg.Pool,
  config: Settings,
  now = Date.now(),
  stopping: () => boolean = () => false,
  history: HistoryPass = newHistoryPass(),
): Promise<MaintenanceRound> {
  const round: MaintenanceRound = {
    ran: false,
    created: [],
    dropped: [],
    identifyMessagesRemoved: 0,
    addressClaimsRemoved: 0,
    outboxRemoved: 0,
    legacyMoved: 0,
    more: false,
  };
  const client = await pool.connect();
  try {
    const [{ locked }] = (await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1) AS locked', [STORAGE_MAINTENANCE_LOCK])).rows;
    if (!locked) return round;
    round.ran = true;
    try {
      // A worker shutting down ends the round at the next step rather than at its budget.
      const budget = Date.now() + Math.max(500, config.storageMaintenanceMs / 2);
      const timeLeft = () => Date.now() < budget && !stopping();
      const existing = await eventPartitions(client);
      round.created = await createEventPartitions(pool, daysToCreate(new Set(existing.map((p) => p.day)), now, config.eventPartitionsAheadDays));
      const pastRetention = new Set(
        daysPastRetention(
          existing.map((p) => p.day),
          now,
          config.eventsRetentionDays,
        ),
      );
      for (const partition of existing.filter((p) => pastRetention.has(p.day) || p.detachPending)) {
        if (!timeLeft()) break;
        round.dropped.push(await dropEventPartition(client, partition));
      }
      for (const name of await leftoverDetached(client)) {
        if (!timeLeft()) break;
        round.dropped.push(await dropEventPartition(client, name));
      }
      for (let n = -1; n !== 0 && timeLeft();) {
        n = await removeIdentifyMessages(client, now, config.identifyIdempotencyDays);
        round.identifyMessagesRemoved += n;
      }
      for (let n = -1; n !== 0 && timeLeft();) {
        n = await removeRelayedOutbox(client, now);
        round.outboxRemoved += n;
      }
      const horizon = historyRemovalHorizon(now, config.addressHistoryDays);
      if (horizon !== null && (history.after !== null || now - history.endedAt >= DAY_MS)) {
        while (timeLeft()) {
          const started = performance.now();
          const batch = await removeAddressClaims(client, horizon, history.after);
          round.addressClaimsRemoved += batch.removed;
          history.after = batch.next;
          if (batch.next === null) {
            history.endedAt = now;
            break;
          }
          // As long a pause as the batch took: a pass over a large history takes at most half of
          // one PostgreSQL core from Identify meanwhile.
          await new Promise((r) => setTimeout(r, performance.now() - started));
        }
      }
      const legacy = stopping()
        ? { moved: 0, done: false }
        : await moveLegacyEvents(pool, client, { now, retentionDays: config.eventsRetentionDays, until: budget });
      round.legacyMoved = legacy.moved;
      round.more = !stopping() && (Date.now() >= budget || !legacy.done);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [STORAGE_MAINTENANCE_LOCK]);
    }
    return round;
  } finally {
    client.release();
  }
}

async function leftoverDetached(client: Pick<pg.ClientBase, 'query'>): Promise<string[]> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname ~ '^events_p[0-9]{8}$'
       AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)`,
  );
  return rows.map((r) => r.name);
}

/** What the storage metrics show: catalog reads and one index probe per environment. */
export async function storageFigures(pool: pg.Pool, now = Date.now()): Promise<StorageFigures> {
  const partitions = await eventPartitions(pool);
  const bytes: Record<string, number> = {};
  for (const table of STORAGE_TABLES) bytes[table] = await tableBytes(pool, table);
  let oldestEventAt: number | null = null;
  for (const p of partitions) {
    const at = await oldestEventIn(pool, p.name);
    if (at) {
      oldestEventAt = at.getTime();
      break;
    }
  }
  return { partitions: partitions.length, partitionsAheadDays: daysAhead(new Set(partitions.map((p) => p.day)), now), bytes, oldestEventAt };
}

/** The loop of a worker: a round every STORAGE_MAINTENANCE_MS (at once again while one says there is more), then the figures. */
export function startStorageMaintenance(deps: {
  pool: pg.Pool;
  config: Settings;
  log: Logger;
  onFigures: (figures: StorageFigures) => void;
  onRound: (outcome: 'completed' | 'failed') => void;
  /** The trusted clock (platform/trusted-clock.ts): which days are ahead or past retention is read on the database's clock. */
  clock: Pick<TrustedClock, 'now'>;
}): PollLoop {
  const { pool, config, log } = deps;
  const history = newHistoryPass();
  return startPollLoop({
    intervalMs: config.storageMaintenanceMs,
    log,
    what: 'storage maintenance',
    round: async (stopping) => {
      let round: MaintenanceRound;
      try {
        round = await maintenanceRound(pool, config, deps.clock.now(), stopping, history);
      } catch (err) {
        deps.onRound('failed');
        throw err;
      }
      deps.onRound('completed');
      if (
        round.created.length ||
        round.dropped.length ||
        round.identifyMessagesRemoved ||
        round.addressClaimsRemoved ||
        round.outboxRemoved ||
        round.legacyMoved
      ) {
        log.info(
          {
            created: round.created,
            dropped: round.dropped.map((d) => ({ ...d, detachMs: Math.round(d.detachMs), dropMs: Math.round(d.dropMs) })),
            identifyMessagesRemoved: round.identifyMessagesRemoved,
            addressClaimsRemoved: round.addressClaimsRemoved,
            outboxRemoved: round.outboxRemoved,
            legacyMoved: round.legacyMoved,
          },
          'storage maintenance',
        );
      }
      if (!stopping()) deps.onFigures(await storageFigures(pool, deps.clock.now()));
      return round.more;
    },
  });
}
