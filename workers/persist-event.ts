import { UnrecoverableError } from 'bullmq';
import type { Db } from '../common/db.ts';
import { checkJourneyLimits, mayDriveJourneys } from '../common/domain/journey-limits.ts';
import type { EventJob } from '../common/queues.ts';
import { insertEventOnce, type EventStatus } from '../common/store/events.ts';
import type { TrackEvent } from '../common/validation/track.ts';

/**
 * The events processor: evaluate the journey size limits, then store the event once.
 * Safe to run any number of times for one job (redelivery after a crash, a stalled job
 * picked up twice): the unique key makes every run after the first a no-op.
 */
export async function persistEvent(db: Db, job: EventJob, status: EventStatus = 'processed', error: string | null = null): Promise<boolean> {
  let event: TrackEvent;
  try {
    event = JSON.parse(job.payload) as TrackEvent;
  } catch {
    throw new UnrecoverableError('payload is not JSON');
  }
  const limits = checkJourneyLimits(event);
  return insertEventOnce(db, {
    environmentId: job.environmentId,
    messageId: event.messageId,
    event: event.event,
    userId: event.userId,
    anonymousId: event.anonymousId,
    timestampMs: job.timestampMs,
    receivedAt: job.receivedAt,
    payload: job.payload,
    status,
    withinLimits: limits.within,
    limitReason: limits.within ? null : limits.reason,
    drivesJourneys: mayDriveJourneys(event, limits),
    error,
  });
}
