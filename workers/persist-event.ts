import { UnrecoverableError } from 'bullmq';
import type { Db } from '../common/db.ts';
import { journeyEligibility } from '../common/domain/journey-limits.ts';
import { createMicroBatch } from '../common/micro-batch.ts';
import type { EventJob } from '../common/queues.ts';
import { insertEventOnce, insertEventsOnce, type EventRow, type EventStatus } from '../common/store/events.ts';
import type { TrackEvent } from '../common/validation/track.ts';
import type { JourneyEngine } from './journeys.ts';

/** The row for a job: the event as accepted, with the journey size limits evaluated. */
export function toEventRow(job: EventJob, status: EventStatus = 'processed', error: string | null = null): EventRow {
  let event: TrackEvent;
  try {
    event = JSON.parse(job.payload) as TrackEvent;
  } catch {
    throw new UnrecoverableError('payload is not JSON');
  }
  return {
    environmentId: job.environmentId,
    messageId: event.messageId,
    event: event.event,
    userId: event.userId,
    anonymousId: event.anonymousId,
    timestampMs: job.timestampMs,
    receivedAt: job.receivedAt,
    payload: job.payload,
    status,
    ...journeyEligibility(event),
    error,
  };
}

/**
 * Stores one event once. Safe to run any number of times for one job (redelivery after a
 * crash, a stalled job picked up twice): the unique key makes every run after the first a no-op.
 */
export async function persistEvent(db: Db, job: EventJob, status: EventStatus = 'processed', error: string | null = null): Promise<boolean> {
  return insertEventOnce(db, toEventRow(job, status, error));
}

/**
 * The events processor's store: rows of jobs processed at the same time go to PostgreSQL in
 * one multi-row INSERT, then through the journey engine, and each job completes only after
 * both are committed. If a batch fails while PostgreSQL answers, its rows are retried one by
 * one so that one bad row fails alone; if PostgreSQL is away, every job of the batch fails and
 * BullMQ retries it (storing is then a no-op and the engine picks up where it stopped).
 */
export function createEventPersister(
  db: Db,
  journeys: Pick<JourneyEngine, 'handleEvents'>,
  options: { maxBatch: number; waitMs: number; onBatch?: (size: number) => void },
) {
  const batch = createMicroBatch<EventRow>(async (rows) => {
    options.onBatch?.(rows.length);
    const stored = await store(db, rows);
    const ok = rows.filter((_, i) => stored[i] === null);
    const handled = await journeys.handleEvents(ok);
    let k = 0;
    return stored.map((err) => err ?? handled[k++]);
  }, options);
  return (job: EventJob) => batch.add(toEventRow(job));
}

/** One outcome per row: null when stored (now or before). */
async function store(db: Db, rows: EventRow[]): Promise<(Error | null)[]> {
  try {
    await insertEventsOnce(db, rows);
    return rows.map(() => null);
  } catch (err) {
    if (rows.length === 1 || !(await answers(db))) throw err;
  }
  return Promise.all(
    rows.map((row) =>
      insertEventOnce(db, row).then(
        () => null,
        (err: Error) => err,
      ),
    ),
  );
}

async function answers(db: Db): Promise<boolean> {
  return db.$queryRaw`SELECT 1`.then(
    () => true,
    () => false,
  );
}
