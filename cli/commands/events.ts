import { journeyEligibility } from '../../common/domain/journey-limits.ts';
import { jobIdFor } from '../../common/queues.ts';
import type { TrackEvent } from '../../common/validation/track.ts';
import { eventNames, findEvent } from '../../common/store/events.ts';
import { journeyActivity } from '../../common/store/journeys.ts';
import { readArgs } from '../args.ts';
import { OperatorError, findEnvironment, type OperatorDeps } from '../operator.ts';

/** events names <org-slug> [--env <path-value>] [--days 30]: the custom events list. */
export async function eventsNames(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug],
    values,
  } = readArgs(argv, { env: 'string', days: 'string' }, ['org-slug']);
  const days = Number(values.days ?? '30');
  if (!Number.isFinite(days) || days <= 0) throw new OperatorError('--days must be a positive number');
  const { env } = await findEnvironment(deps.db, orgSlug, values.env);
  return eventNames(deps.db, env.id, days);
}

const PENDING_STATES = new Set(['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed']);

/** events get <org-slug> <messageId> [--env <path-value>]: the stored event, or `pending` while queued. */
export async function eventsGet(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug, messageId],
    values,
  } = readArgs(argv, { env: 'string' }, ['org-slug', 'messageId']);
  const { env } = await findEnvironment(deps.db, orgSlug, values.env);
  const stored = await findEvent(deps.db, env.id, messageId);
  if (stored) return stored;
  const job = await deps.eventsQueue().getJob(jobIdFor(env.id, messageId));
  if (!job) throw new OperatorError(`no event ${JSON.stringify(messageId)} in ${env.pathValue}`);
  const state = await job.getState();
  // A job that failed for good but could not be recorded (PostgreSQL was down) is still visible here.
  if (state === 'failed') return { messageId, status: 'failed', receivedAt: job.data.receivedAt, error: job.failedReason, ...queuedEvent(job.data.payload) };
  if (!PENDING_STATES.has(state)) throw new OperatorError(`no event ${JSON.stringify(messageId)} in ${env.pathValue}`);
  return { messageId, status: 'pending', receivedAt: job.data.receivedAt, ...queuedEvent(job.data.payload) };
}

/** A queued job's event, with the journey limits the worker will record; the raw text when it is not JSON (a job failed for exactly that). */
function queuedEvent(payload: string) {
  let event: TrackEvent;
  try {
    event = JSON.parse(payload) as TrackEvent;
  } catch {
    return { withinLimits: false, limitReason: null, drivesJourneys: false, event: payload };
  }
  return { ...journeyEligibility(event), event };
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
    positionals: [orgSlug],
    values,
  } = readArgs(argv, { env: 'string', limit: 'string' }, ['org-slug']);
  const limit = Number(values.limit ?? '100');
  if (!Number.isInteger(limit) || limit <= 0 || limit > 10_000) throw new OperatorError('--limit must be a whole number from 1 to 10000');
  const { env } = await findEnvironment(deps.db, orgSlug, values.env);
  const { names, items } = await journeyActivity(deps.db, env.id, limit);
  if (!names.length) return [];
  const used = new Set(names);
  const stored = new Set(items.map((i) => i.messageId));
  const pending = [];
  for (const job of await deps.eventsQueue().getJobs(['waiting', 'active', 'delayed', 'prioritized'], 0, limit - 1)) {
    if (!job || job.data.environmentId !== env.id) continue;
    const event = parsePayload(job.data.payload) as { event?: unknown; userId?: unknown; anonymousId?: unknown };
    if (typeof event?.event !== 'string' || !used.has(event.event) || stored.has(job.data.messageId)) continue;
    pending.push({
      event: event.event,
      messageId: job.data.messageId,
      userId: typeof event.userId === 'string' ? event.userId : null,
      anonymousId: typeof event.anonymousId === 'string' ? event.anonymousId : null,
      source: 'track-api' as const,
      status: 'pending',
      receivedAt: job.data.receivedAt,
    });
  }
  return [...pending, ...items].sort((a, b) => b.receivedAt - a.receivedAt).slice(0, limit);
}
