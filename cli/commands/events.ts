import { journeyEligibility } from '../../events/journey-limits.ts';
import type { JobType, Queue } from 'bullmq';
import { jobIdFor } from '../../platform/queue-keys.ts';
import type { EventBatchJob, QueuedEvent } from '../../events/jobs.ts';
import type { TrackEvent } from '../../events/track.ts';
import { retryFailedEvent } from '../../events/dead-letter-retry.ts';
import { eventNames, findEvent } from '../../events/event-store.ts';
import { journeyActivity } from '../../journeys/journey-store.ts';
import { environmentCommand } from '../environment-command.ts';
import { OperatorError, type OperatorDeps } from '../../operations/operator.ts';

/** events names <org-slug> [--env <path-value>] [--days 30]: the custom events list. */
export async function eventsNames(deps: OperatorDeps, argv: string[]) {
  const { env, numbers } = await environmentCommand(deps, argv, 'events names');
  return eventNames(deps.db, env.id, numbers.days);
}

/** events get <org-slug> <messageId> [--env <path-value>]: the stored event, or `pending` while its batch is queued. */
export async function eventsGet(deps: OperatorDeps, argv: string[]) {
  const {
    env,
    positionals: [, messageId],
  } = await environmentCommand(deps, argv, 'events get');
  const stored = await findEvent(deps.db, env.id, messageId);
  if (stored) return stored;
  const found = (await deadLettered(deps, env.id, messageId)) ?? (await inQueuedBatch(deps, env.id, messageId));
  if (found) {
    const { event, state, error } = found;
    // A batch that failed for good whose events could not be recorded (PostgreSQL was down) is still visible here.
    if (state === 'failed') return { messageId, status: 'failed', receivedAt: event.receivedAt, error, ...queuedEvent(event.payload) };
    return { messageId, status: 'pending', receivedAt: event.receivedAt, ...queuedEvent(event.payload) };
  }
  // Its batch may have completed while the queue was read.
  const late = await findEvent(deps.db, env.id, messageId);
  if (late) return late;
  throw new OperatorError(`no event ${JSON.stringify(messageId)} in ${env.pathValue}`);
}

interface Found {
  event: QueuedEvent;
  state: 'failed' | 'pending';
  error?: string;
}

async function deadLettered(deps: OperatorDeps, environmentId: string, messageId: string): Promise<Found | null> {
  const job = await deps.deadLetterQueue().getJob(jobIdFor(environmentId, messageId));
  if (!job) return null;
  const state = await job.getState();
  if (state === 'failed') return { event: job.data.event, state, error: job.failedReason };
  // Not yet parked (its first run fails it with the refusal), or being retried.
  if (job.attemptsMade === 0 && job.data.error !== null && state !== 'completed') return { event: job.data.event, state: 'failed', error: job.data.error };
  return state === 'completed' || state === 'unknown' ? null : { event: job.data.event, state: 'pending' };
}

/** Batch jobs still to run (or failed for good), scanned in pages: an operator's look-up, O(queue). */
async function inQueuedBatch(deps: OperatorDeps, environmentId: string, messageId: string): Promise<Found | null> {
  for (const state of ['active', 'waiting', 'prioritized', 'delayed', 'failed'] as const) {
    for await (const event of queuedEvents(deps.eventsQueues(), [state])) {
      if (event.environmentId === environmentId && event.messageId === messageId) {
        return state === 'failed' ? { event, state, error: 'its batch failed for good' } : { event, state: 'pending' };
      }
    }
  }
  return null;
}

const PAGE = 50;

/** Every event of the batch jobs in `states` of every partition, job by job (pages of PAGE jobs). */
async function* queuedEvents(queues: Queue<EventBatchJob>[], states: JobType[]): AsyncGenerator<QueuedEvent> {
  for (const queue of queues) {
    for (let start = 0; ; start += PAGE) {
      const jobs = await queue.getJobs(states, start, start + PAGE - 1);
      for (const job of jobs) if (Array.isArray(job?.data?.events)) yield* job.data.events;
      if (jobs.length < PAGE) break;
    }
  }
}

/**
 * events retry <org-slug> <messageId> [--env <path-value>]: a failed event goes through the
 * worker once more (its dead-letter job is retried, or made from the stored `failed` row).
 */
export async function eventsRetry(deps: OperatorDeps, argv: string[]) {
  const {
    env,
    positionals: [, messageId],
  } = await environmentCommand(deps, argv, 'events retry');
  if ((await retryFailedEvent(deps.deadLetterQueue(), deps.db, env.id, messageId)) === 'not-failed') {
    throw new OperatorError(`event ${JSON.stringify(messageId)} in ${env.pathValue} has not failed`);
  }
  return { messageId, status: 'retrying' };
}

/** A queued job's event, with the journey limits the worker will record; the raw text when it is not JSON (a job failed for exactly that). */
function queuedEvent(payload: string) {
  let event: TrackEvent;
  try {
    event = JSON.parse(payload) as TrackEvent;
  } catch {
    return { withinLimits: false, limitReason: null, drivesJourneys: false, event: payload };
  }
  return { ...journeyEligibility(event, payload), event };
}

/** A job's payload as JSON, or as the raw text when it is not. */
function parsePayload(payload: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    return payload;
  }
}

/**
 * events activity <org-slug> [--env <path-value>] [--limit 100]: the activity list, newest
 * first: events whose name a published journey uses, stored or still queued (`pending`).
 */
export async function eventsActivity(deps: OperatorDeps, argv: string[]) {
  const {
    env,
    numbers: { limit },
  } = await environmentCommand(deps, argv, 'events activity');
  const { names, items } = await journeyActivity(deps.db, env.id, limit);
  if (!names.length) return [];
  const used = new Set(names);
  const stored = new Set(items.map((i) => i.messageId));
  const pending = [];
  for await (const queued of queuedEvents(deps.eventsQueues(), ['active', 'waiting', 'prioritized', 'delayed'])) {
    if (pending.length >= limit) break;
    if (queued.environmentId !== env.id || stored.has(queued.messageId)) continue;
    const event = parsePayload(queued.payload) as { event?: unknown; userId?: unknown; anonymousId?: unknown };
    if (typeof event?.event !== 'string' || !used.has(event.event)) continue;
    pending.push({
      event: event.event,
      messageId: queued.messageId,
      userId: typeof event.userId === 'string' ? event.userId : null,
      anonymousId: typeof event.anonymousId === 'string' ? event.anonymousId : null,
      source: 'track-api' as const,
      status: 'pending',
      receivedAt: queued.receivedAt,
    });
  }
  return [...pending, ...items].sort((a, b) => b.receivedAt - a.receivedAt).slice(0, limit);
}
