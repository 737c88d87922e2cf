// The events processor's store. A batch job's events become rows; the rows of the jobs being
// processed at the same moment go to PostgreSQL in one set-based INSERT, then through the
// journey engine as a batch, and each job completes only after both are committed. A repeat
// (redelivery after a crash, a stalled job run twice, a duplicate anywhere) stores nothing:
// the messageId's row in event_ids decides.
import type { Db } from '../platform/db.ts';
import { dbErrorMessage, poolOf, splitOnRefusal } from '../platform/db.ts';
import { journeyEligibility } from '../events/journey-limits.ts';
import { createMicroBatch } from '../platform/micro-batch.ts';
import type { QueuedEvent } from '../events/jobs.ts';
import type { ErasureGuard } from '../events/erasure-guard.ts';
import { insertEventsOnce, isMissingPartition, type EventRow, type EventStatus, type IdentityWindow } from '../events/event-store.ts';
import { createEventPartitions } from '../events/storage.ts';
import { clampedReceipt, utcDay } from '../events/partition-plan.ts';
import type { TrackEvent } from '../events/track.ts';
import type { JourneyEngine } from '../journeys/engine.ts';

/** An event PostgreSQL (or the worker) refused for its data, with the reason. */
export interface Refused {
  event: QueuedEvent;
  error: string;
}

export const NOT_JSON = 'payload is not JSON';

/** The row for an event: the event as accepted, with the journey size limits evaluated; null when its payload cannot be read. */
export function toEventRow(queued: QueuedEvent, status: EventStatus = 'processed', error: string | null = null): EventRow | null {
  let event: TrackEvent;
  try {
    event = JSON.parse(queued.payload) as TrackEvent;
  } catch {
    return null;
  }
  return {
    environmentId: queued.environmentId,
    messageId: event.messageId,
    event: event.event,
    userId: event.userId,
    anonymousId: event.anonymousId,
    timestampMs: queued.timestampMs,
    receivedAt: queued.receivedAt,
    payload: queued.payload,
    status,
    ...journeyEligibility(event, queued.payload),
    error,
  };
}

/** Stores one event once (any number of runs for it write one row); true when this run wrote it. */
export async function persistEvent(
  db: Db,
  queued: QueuedEvent,
  status: EventStatus = 'processed',
  error: string | null = null,
  time: StoreTime = OWN_CLOCK_FOREVER,
): Promise<boolean> {
  const row = toEventRow(queued, status, error);
  if (!row) throw new Error(NOT_JSON);
  return (await insertWithPartitions(db, [row], time)) === 1;
}

/**
 * What the store judges time by: the retention (a messageId whose first copy's day is past it is
 * a new event, events/event-store.ts) and the trusted clock (platform/trusted-clock.ts), against which a
 * receipt is clamped before its day's partition may be made.
 */
export interface StoreTime extends IdentityWindow {
  now(): number;
}

const OWN_CLOCK_FOREVER: StoreTime = { retentionDays: null, now: Date.now };

interface JobRows {
  rows: EventRow[];
  /** The event of each row, same index. */
  sources: QueuedEvent[];
  refused: Refused[];
}

/**
 * Returns `persist(events)`: resolves with the events refused for their data once everything
 * else is stored and handed to the journeys; rejects when PostgreSQL is unavailable (the job
 * fails and BullMQ retries it with backoff) or the journey engine failed (the same). Refused
 * events are recorded with status `failed` where PostgreSQL takes even that.
 */
export function createEventPersister(
  db: Db,
  journeys: Pick<JourneyEngine, 'handleEvents'>,
  options: {
    maxRows: number;
    waitMs: number;
    time: StoreTime;
    onStatement?: (rows: number) => void;
    /** Holds the erasure lock while a batch is stored, and drops erased and suppressed users' events (events/erasure-guard.ts). */
    guard: ErasureGuard;
    /** Events an erasure or a suppression dropped (stored nowhere). */
    onDropped?: (rows: EventRow[]) => void;
  },
) {
  const batch = createMicroBatch<JobRows>(
    (jobs) =>
      // Erased and suppressed users' events leave the batch here, under the lock an erasure waits for.
      options.guard.hold(
        jobs.flatMap((j) => j.rows),
        async ({ dropped }) => {
          if (dropped.length) {
            const gone = new Set(dropped.map((d) => d.row));
            for (const job of jobs) keepOnly(job, (row) => !gone.has(row));
            options.onDropped?.(dropped.map((d) => d.row));
          }
          return store(jobs);
        },
      ),
    { maxBatch: Infinity, waitMs: options.waitMs, weight: (j) => j.rows.length, maxWeight: options.maxRows },
  );

  async function store(jobs: JobRows[]) {
    const rows = jobs.flatMap((j) => j.rows);
    options.onStatement?.(rows.length);
    const outcomes = await storeIsolating(db, rows, options.time);
    const handled = await journeys.handleEvents(rows.filter((_, k) => outcomes[k] === null));
    let k = 0;
    let h = 0;
    const failedRows: EventRow[] = [];
    const results = jobs.map((job) => {
      let journeyError: Error | null = null;
      job.rows.forEach((row, i) => {
        const refusal = outcomes[k++];
        if (refusal) {
          const error = dbErrorMessage(refusal);
          job.refused.push({ event: job.sources[i], error });
          failedRows.push({ ...row, status: 'failed', error });
        } else journeyError ??= handled[h++];
      });
      return journeyError;
    });
    await recordFailed(db, failedRows, options.time);
    return results;
  }

  return async function persist(events: readonly QueuedEvent[]): Promise<Refused[]> {
    const job: JobRows = { rows: [], sources: [], refused: [] };
    for (const event of events) {
      const row = toEventRow(event);
      if (row) {
        job.rows.push(row);
        job.sources.push(event);
      } else job.refused.push({ event, error: NOT_JSON });
    }
    if (job.rows.length) await batch.add(job);
    return job.refused;
  };
}

/** Drops a job's rows (and their events) that `keep` refuses. */
function keepOnly(job: JobRows, keep: (row: EventRow) => boolean): void {
  const rows: EventRow[] = [];
  const sources: QueuedEvent[] = [];
  job.rows.forEach((row, i) => {
    if (keep(row)) (rows.push(row), sources.push(job.sources[i]));
  });
  job.rows = rows;
  job.sources = sources;
}

/**
 * One outcome per row: null when stored (now or before), else PostgreSQL's refusal of it (the
 * set goes in one statement, split on a refusal: db.ts). Any other failure (PostgreSQL away, a
 * timeout, a deadlock) fails the whole call.
 */
export function storeIsolating(db: Db, rows: EventRow[], time: StoreTime): Promise<(Error | null)[]> {
  return splitOnRefusal(rows, async (part) => (await insertWithPartitions(db, part, time), part.map(() => null)));
}

/**
 * insertEventsOnce, and when no partition holds a row's received time (the maintenance has not
 * made it ahead: a worker down for days, an event queued long ago), the partitions of the rows'
 * days are made and the statement runs again, once. Never a refusal of the event for its data:
 * the day it needs simply did not exist yet. A receipt further ahead of the trusted clock than
 * the future bound (a gateway whose clock runs ahead) is clamped to that clock first: a
 * partition is never made for a day the service's clock has not reached.
 */
async function insertWithPartitions(db: Db, rows: EventRow[], time: StoreTime): Promise<number> {
  const now = time.now();
  for (const row of rows) row.receivedAt = clampedReceipt(row.receivedAt, now);
  try {
    return await insertEventsOnce(db, rows, time);
  } catch (err) {
    if (!isMissingPartition(err)) throw err;
    // The days of the rows only, not every day between them: one row's clock far off costs one partition.
    await createEventPartitions(poolOf(db), [...new Set(rows.map((r) => utcDay(r.receivedAt)))]);
    return insertEventsOnce(db, rows, time);
  }
}

/** Best effort, one row at a time: PostgreSQL may refuse a row even as `failed` (the dead-letter job keeps the event either way). */
async function recordFailed(db: Db, rows: EventRow[], time: StoreTime): Promise<void> {
  for (const row of rows) await insertWithPartitions(db, [row], time).catch(() => {});
}

/**
 * Records a batch's events as `failed` with `error` after its last attempt: one statement (bisected
 * if PostgreSQL refuses some rows), so that PostgreSQL being away costs one connect timeout, not
 * one per event. Returns false when it could not (the dead-letter queue still holds the events).
 */
export async function recordBatchFailed(db: Db, events: readonly QueuedEvent[], error: string, time: StoreTime): Promise<boolean> {
  const rows = events.map((e) => toEventRow(e, 'failed', error)).filter((r): r is EventRow => r !== null);
  return storeIsolating(db, rows, time).then(
    () => true,
    () => false,
  );
}
