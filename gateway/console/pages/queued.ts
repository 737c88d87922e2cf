// The events still queued (`pending`): the heads of the events of the newest queued batch jobs of
// every partition, read as the live view reads them (gateway/live/job-digests.ts: metadata, then
// each job's heads once, at most a budget of bytes per read; properties never leave Redis).
import type { Queue } from 'bullmq';
import type { EventBatchJob } from '../../../events/jobs.ts';
import { fieldIs, headIdentity, type EventHead } from '../../live/batch-digest.ts';
import { unreadOf, type JobDigests, type Listing } from '../../live/job-digests.ts';

/** Queued batch jobs of each state and partition a read looks through. */
const QUEUED_JOBS_READ = 100;

export interface QueuedFilter {
  messageId?: string;
  event?: string;
  userId?: string;
  anonymousId?: string;
}

/** The environment's queued events matching `filter`, newest first, at most `limit`; and what the read left unread. */
export async function queuedEvents(
  queues: Queue<EventBatchJob>[],
  digests: JobDigests,
  environmentId: string,
  filter: QueuedFilter,
  limit: number,
): Promise<{ events: EventHead[]; unread: Listing['unread'] }> {
  const listings = await Promise.all(queues.map((queue) => digests.list(queue, ['active', 'waiting', 'prioritized', 'delayed'], QUEUED_JOBS_READ)));
  const seen = new Set<string>();
  const events: EventHead[] = [];
  for (const job of listings.flatMap((l) => l.jobs)) {
    for (const head of job.heads ?? []) {
      if (head.environmentId !== environmentId) continue;
      if (filter.messageId !== undefined && !fieldIs(head.messageId, filter.messageId)) continue;
      if (filter.event !== undefined && !fieldIs(head.event, filter.event)) continue;
      if (filter.userId !== undefined && !fieldIs(head.userId, filter.userId) && !fieldIs(head.userId, filter.userId.trim())) continue;
      if (filter.anonymousId !== undefined && !fieldIs(head.anonymousId, filter.anonymousId)) continue;
      // Queued twice (a retried enqueue): shown once.
      const id = headIdentity(head);
      if (seen.has(id)) continue;
      seen.add(id);
      events.push(head);
    }
  }
  return { events: events.sort((a, b) => b.receivedAt - a.receivedAt).slice(0, limit), unread: unreadOf(listings) };
}
