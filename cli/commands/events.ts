import { jobIdFor } from '../../common/queues.ts';
import { eventNames, findEvent } from '../../common/store/events.ts';
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
  if (state === 'failed')
    return { messageId, status: 'failed', receivedAt: job.data.receivedAt, error: job.failedReason, event: parsePayload(job.data.payload) };
  if (!PENDING_STATES.has(state)) throw new OperatorError(`no event ${JSON.stringify(messageId)} in ${env.pathValue}`);
  return { messageId, status: 'pending', receivedAt: job.data.receivedAt, event: parsePayload(job.data.payload) };
}

/** A job's payload as JSON, or as the raw text when it is not (a job failed for exactly that). */
function parsePayload(payload: string): unknown {
  try {
    return JSON.parse(payload);
  } catch {
    return payload;
  }
}
