// What an erasure removes from Redis once PostgreSQL holds nothing of the person: their events
// in batch jobs that failed for good and in the dead-letter queue (both small unless something
// is wrong, so they are read through), and the service events made of the outbox rows the
// erasure deleted, which the relay's queue keeps after it ran them (their ids, `o<outbox id>`,
// make a row relayed twice one job): found by id, whatever else that queue holds. Jobs still
// waiting are not touched: the worker's guard drops the person's events when it comes to them
// (privacy/erasure.ts), and a job a worker holds may be running.
import type { Job, Queue } from 'bullmq';
import type { DeadLetterJob, EventBatchJob, QueuedEvent, ServiceEventJob } from './jobs.ts';
import { userKeyOf } from '../profiles/person.ts';

export interface PersonQueues {
  events: Queue<EventBatchJob>[];
  deadLetters: Queue<DeadLetterJob>;
  serviceEvents: Queue<ServiceEventJob>;
}

export interface ErasedPerson {
  environmentId: string;
  /** Every user ID the erasure covered (as given, or as stored: both trim to the key). */
  userIds: readonly string[];
  /** The erasure's time: what was received up to it is the person's; later calls are new data. */
  erasedAt: number;
  /** The outbox rows the erasure deleted: their service-event jobs go. */
  outboxIds: readonly string[];
}

/** Jobs read per page: a queue of failed jobs is walked a page at a time. */
const PAGE = 500;

/** The userId of a job's JSON payload, or null. */
function userIdOf(payload: string): string | null {
  try {
    const userId = (JSON.parse(payload) as { userId?: unknown }).userId;
    return typeof userId === 'string' ? userId : null;
  } catch {
    return null;
  }
}

/** Whether a queued event is the erased person's: their environment, a userId that trims to one of theirs, received up to the erasure. */
function isTheirs(person: ErasedPerson, keys: ReadonlySet<string>, event: QueuedEvent): boolean {
  if (event.environmentId !== person.environmentId || event.receivedAt > person.erasedAt) return false;
  const userId = userIdOf(event.payload);
  return userId !== null && keys.has(userKeyOf(userId));
}

/** Every job of `states` that `wanted` picks, read a page at a time; the caller changes them once the reading is done (a removal would shift the pages). */
async function jobsWhere<T>(queue: Queue<T>, states: ('failed' | 'completed' | 'waiting' | 'delayed')[], wanted: (job: Job<T>) => boolean): Promise<Job<T>[]> {
  const picked: Job<T>[] = [];
  for (let start = 0; ; start += PAGE) {
    const jobs = await queue.getJobs(states, start, start + PAGE - 1, true);
    for (const job of jobs) if (job && wanted(job)) picked.push(job);
    if (jobs.length < PAGE) return picked;
  }
}

/** Removes the person's events and service events from the queues above; returns how many it removed. */
export async function forgetQueued(queues: PersonQueues, person: ErasedPerson): Promise<number> {
  const keys = new Set(person.userIds.map(userKeyOf));
  let removed = 0;
  for (const queue of queues.events) {
    for (const job of await jobsWhere(queue, ['failed'], (j) => j.data.events.some((e) => isTheirs(person, keys, e)))) {
      const kept = job.data.events.filter((e) => !isTheirs(person, keys, e));
      removed += job.data.events.length - kept.length;
      if (kept.length) await job.updateData({ events: kept });
      else await job.remove();
    }
  }
  for (const job of await jobsWhere(queues.deadLetters, ['failed', 'completed', 'waiting', 'delayed'], (j) => isTheirs(person, keys, j.data.event))) {
    removed++;
    await job.remove();
  }
  for (const id of person.outboxIds) {
    const job = await queues.serviceEvents.getJob(`o${id}`);
    // A job a worker holds is running: its journey work re-reads the tombstone.
    if (job && !(await job.isActive())) {
      removed++;
      await job.remove();
    }
  }
  return removed;
}
