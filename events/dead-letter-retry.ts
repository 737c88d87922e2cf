// Sending a failed event through the worker once more: `intake events retry`, the live view's
// retry button (gateway/live/pages.ts) and the console's (gateway/console/dead-letter-actions.ts)
// all do it here. Its dead-letter job is retried when it is there and failed; otherwise a job is
// made from the stored `failed` row.
import type { Queue } from 'bullmq';
import type { Db } from '../platform/db.ts';
import { jobIdFor } from '../platform/queue-keys.ts';
import type { DeadLetterJob, QueuedEvent } from './jobs.ts';
import { findFailedEvent } from './event-store.ts';

/** `retrying` once a job will run it; `not-failed` when there is nothing failed to retry. */
export async function retryFailedEvent(queue: Queue<DeadLetterJob>, db: Db, environmentId: string, messageId: string): Promise<'retrying' | 'not-failed'> {
  const job = await queue.getJob(jobIdFor(environmentId, messageId));
  const state = job ? await job.getState() : null;
  if (job && state === 'failed') {
    await job.retry('failed');
    return 'retrying';
  }
  if (job && state !== 'completed') return 'retrying';
  const failed = await findFailedEvent(db, environmentId, messageId);
  if (!failed) return 'not-failed';
  // A completed dead-letter job of an earlier retry would keep the id taken.
  if (job) await job.remove();
  await queue.add('track', { event: failed, error: null }, { jobId: jobIdFor(environmentId, messageId) });
  return 'retrying';
}

/** A dead-letter job's id as the pages' forms carry it (ASCII: a messageId may not survive a form field as it was). */
export const isDeadLetterJobId = (jobId: string) => /^[A-Za-z0-9_-]{1,64}$/.test(jobId);

/**
 * Retries the event the dead-letter job `jobId` holds (the pages' Retry buttons name a dead letter
 * by its job id). Null when there is no such job, or it is of another environment than
 * `environmentId` (when given), or nothing failed is left to retry; else the event being retried.
 */
export async function retryDeadLetter(queue: Queue<DeadLetterJob>, db: Db, jobId: string, environmentId?: string): Promise<QueuedEvent | null> {
  if (!isDeadLetterJobId(jobId)) return null;
  // The one event this job holds, read on demand.
  const event = (await queue.getJob(jobId))?.data?.event;
  if (!event || (environmentId !== undefined && event.environmentId !== environmentId)) return null;
  const outcome = await retryFailedEvent(queue, db, event.environmentId, event.messageId);
  return outcome === 'retrying' ? event : null;
}
