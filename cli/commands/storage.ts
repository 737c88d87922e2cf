import { historyRemovalHorizon } from '../../identify/history-retention.ts';
import { DAY_MS, daysAhead, retentionBound } from '../../events/partition-plan.ts';
import { poolOf } from '../../platform/db.ts';
import { RELAYED_OUTBOX_KEEP_MS, eventPartitions, hasLegacyEvents, oldestEventIn, tableStorage } from '../../events/storage.ts';
import { readArgs } from '../args.ts';
import type { OperatorDeps } from '../../operations/operator.ts';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

/** storage: rows, bytes, oldest and newest, and what retention removes next, per table. */
export async function storageCommand(deps: OperatorDeps, argv: string[]) {
  readArgs(argv, 'storage');
  const { config } = deps;
  const pool = poolOf(deps.db);
  const now = Date.now();
  const partitions = (await eventPartitions(pool)).filter((p) => !p.detachPending);
  let oldestEvent: Date | null = null;
  for (const p of partitions) if ((oldestEvent = await oldestEventIn(pool, p.name))) break;
  const bound = retentionBound(now, config.eventsRetentionDays);
  const oldest = partitions[0];
  const legacy = (await hasLegacyEvents(pool)) ? await tableStorage(pool, 'events_legacy') : null;
  const times = async (table: string, column: string) => {
    const stats = await tableStorage(pool, table);
    if (stats.rowsEstimated) return { ...stats, oldest: null, newest: null };
    const { rows } = await pool.query<{ oldest: Date | null; newest: Date | null }>(`SELECT min(${column}) AS oldest, max(${column}) AS newest FROM ${table}`);
    return { ...stats, oldest: rows[0].oldest?.toISOString() ?? null, newest: rows[0].newest?.toISOString() ?? null };
  };
  const identifyBound = now - config.identifyIdempotencyDays * DAY_MS;
  const historyHorizon = historyRemovalHorizon(now, config.addressHistoryDays);
  return {
    events: {
      ...(await tableStorage(pool, 'events')),
      partitions: partitions.length,
      oldestPartition: oldest?.name ?? null,
      newestPartition: partitions.at(-1)?.name ?? null,
      partitionsAheadDays: daysAhead(new Set(partitions.map((p) => p.day)), now),
      oldestEvent: oldestEvent?.toISOString() ?? null,
      retentionDays: config.eventsRetentionDays ?? 'forever',
      // The oldest partition goes once all of its day is past the retention.
      nextRemoval:
        bound === null || !oldest ? null : { partition: oldest.name, from: iso(Math.max(now, oldest.day + DAY_MS + config.eventsRetentionDays! * DAY_MS)) },
      ...(legacy ? { legacyRows: legacy.rows } : {}),
    },
    event_ids: { ...(await tableStorage(pool, 'event_ids')), removedWith: 'their events’ partition' },
    identify_messages: {
      ...(await times('identify_messages', 'created_at')),
      keptDays: config.identifyIdempotencyDays,
      nextRemoval: { createdBefore: iso(identifyBound) },
    },
    address_claims: {
      ...(await tableStorage(pool, 'address_claims')),
      keptDays: config.addressHistoryDays ?? 'forever',
      // With forever, a consent decision may be dated at any time and reads the address as of then.
      nextRemoval: historyHorizon === null ? null : { atOrBefore: iso(historyHorizon), except: 'the address as of then, per profile and channel' },
    },
    outbox_events: { ...(await times('outbox_events', 'created_at')), nextRemoval: { relayedBefore: iso(now - RELAYED_OUTBOX_KEEP_MS) } },
    consent_decisions: { ...(await times('consent_decisions', 'updated_at')), kept: 'always: the proof of consent' },
  };
}
