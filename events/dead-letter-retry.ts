// Sending a failed event through the worker once more: `intake events retry` and the dashboard's
// retry button (gateway/live/pages.ts) both do it here. Its dead-letter job is retried when it
// is there and failed; otherwise a job is made from the stored `failed` row.
import type { Queue } from 'bullmq';
import type { Db } from '../platform/db.ts';
import { jobIdFor } from '../platform/queue-keys.ts';
import type { DeadLetterJob } from './jobs.ts';
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
