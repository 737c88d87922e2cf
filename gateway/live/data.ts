// What the live pages show, read when a page is asked for, each read bounded: the newest events
// of an environment (PostgreSQL, its received_at index, and the batches still queued), the
// Identify calls gateways recorded (a Redis stream per environment), the answers per minute of
// the last hour (one Redis hash per minute), and the dead-letter queue.
import type { Queue } from 'bullmq';
import type { Db } from '../../common/db.ts';
import { identifyCallsKey, LIVE_ROUTES, minuteOf, ratesKey, type LiveRoute } from '../../common/live-keys.ts';
import type { DeadLetterJob, EventBatchJob, QueuedEvent } from '../../common/queues.ts';
import type { Redis } from '../../common/redis.ts';
import { recentEvents, type RecentEvent } from '../../common/store/events.ts';

export interface EnvironmentChoice {
  id: string;
  org: string;
  pathValue: string;
  removed: boolean;
}

/** The environments to choose from, newest first (a bounded list: a path value can always be typed). */
export async function listEnvironments(db: Db, limit = 500): Promise<EnvironmentChoice[]> {
  const rows = await db.environment.findMany({
    orderBy: { createdAt: 'desc' },
    take: limit,
    select: { id: true, pathValue: true, removedAt: true, organization: { select: { slug: true } } },
  });
  return rows.map((r) => ({ id: r.id, org: r.organization.slug, pathValue: r.pathValue, removed: r.removedAt !== null }));
}

export async function environmentByPath(db: Db, pathValue: string): Promise<EnvironmentChoice | null> {
  const r = await db.environment.findUnique({
    where: { pathValue },
    select: { id: true, pathValue: true, removedAt: true, organization: { select: { slug: true } } },
  });
  return r && { id: r.id, org: r.organization.slug, pathValue: r.pathValue, removed: r.removedAt !== null };
}

export interface EventFilter {
  messageId?: string;
  userId?: string;
}

/** How many queued batch jobs a page looks through for events not stored yet. */
const QUEUED_JOBS_READ = 100;

function fromQueue(queued: QueuedEvent): RecentEvent {
  let event: { event?: unknown; userId?: unknown; anonymousId?: unknown } = {};
  try {
    event = JSON.parse(queued.payload);
  } catch {
    // A payload that is not JSON is shown by its messageId alone.
  }
  return {
    event: typeof event.event === 'string' ? event.event : '',
    messageId: queued.messageId,
    userId: typeof event.userId === 'string' ? event.userId : null,
    anonymousId: typeof event.anonymousId === 'string' ? event.anonymousId : null,
    status: 'pending',
    receivedAt: queued.receivedAt,
    error: null,
  };
}

/** The newest events of an environment, stored or still queued (`pending`) in any partition, newest first. */
export async function environmentEvents(
  db: Db,
  queues: Queue<EventBatchJob>[],
  environmentId: string,
  filter: EventFilter,
  limit: number,
): Promise<RecentEvent[]> {
  const [stored, ...perPartition] = await Promise.all([
    recentEvents(db, environmentId, filter, limit),
    ...queues.map((queue) => queue.getJobs(['active', 'waiting', 'prioritized', 'delayed'], 0, QUEUED_JOBS_READ - 1)),
  ]);
  const jobs = perPartition.flat();
  const seen = new Set(stored.map((e) => e.messageId));
  const pending: RecentEvent[] = [];
  for (const job of jobs) {
    for (const queued of Array.isArray(job?.data?.events) ? job.data.events : []) {
      if (queued.environmentId !== environmentId || seen.has(queued.messageId)) continue;
      const event = fromQueue(queued);
      if (filter.messageId !== undefined && event.messageId !== filter.messageId) continue;
      if (filter.userId !== undefined && event.userId !== filter.userId && event.anonymousId !== filter.userId) continue;
      seen.add(event.messageId);
      pending.push(event);
    }
  }
  return [...pending, ...stored].sort((a, b) => b.receivedAt - a.receivedAt).slice(0, limit);
}

export interface IdentifyCallView {
  at: number;
  userId: string;
  messageId: string;
  outcome: string;
  changed: string[];
}

/** The newest Identify calls recorded for an environment (gateway/live/recorder.ts), newest first. */
export async function identifyCalls(redis: Redis, prefix: string, environmentId: string, filter: EventFilter, limit: number): Promise<IdentifyCallView[]> {
  const filtered = filter.userId !== undefined || filter.messageId !== undefined;
  // The stream holds at most LIVE_IDENTIFY_CALLS entries (10 000 at most): a filter reads it whole.
  const entries = await redis.xrevrange(identifyCallsKey(prefix, environmentId), '+', '-', 'COUNT', filtered ? 10_000 : limit);
  const calls: IdentifyCallView[] = [];
  for (const [id, fields] of entries) {
    const f: Record<string, string> = {};
    for (let i = 0; i + 1 < fields.length; i += 2) f[fields[i]] = fields[i + 1];
    if (filter.userId !== undefined && f.u !== filter.userId) continue;
    if (filter.messageId !== undefined && f.m !== filter.messageId) continue;
    let changed: string[] = [];
    try {
      changed = JSON.parse(f.c ?? '[]');
    } catch {
      // An entry written by another version: shown without its traits.
    }
    calls.push({ at: Number(id.split('-')[0]), userId: f.u ?? '', messageId: f.m ?? '', outcome: f.o ?? '', changed });
    if (calls.length >= limit) break;
  }
  return calls;
}

export interface RouteRates {
  /** Answers per minute, oldest minute first. */
  total: number[];
  clientErrors: number[];
  serverErrors: number[];
}

/** Answers per minute of each API over the last `minutes` minutes (the current one last, still filling). */
export async function answerRates(
  redis: Redis,
  prefix: string,
  now: number,
  minutes = 60,
): Promise<{ minutes: number[]; routes: Record<LiveRoute, RouteRates> }> {
  const last = minuteOf(now);
  const range = Array.from({ length: minutes }, (_, i) => last - minutes + 1 + i);
  const pipeline = redis.pipeline();
  for (const minute of range) pipeline.hgetall(ratesKey(prefix, minute));
  const results = (await pipeline.exec()) ?? [];
  const routes = Object.fromEntries(LIVE_ROUTES.map((r) => [r, { total: [], clientErrors: [], serverErrors: [] }])) as unknown as Record<LiveRoute, RouteRates>;
  results.forEach(([err, value], i) => {
    const counts = (err ? {} : value) as Record<string, string>;
    for (const route of LIVE_ROUTES) {
      routes[route].total[i] = 0;
      routes[route].clientErrors[i] = 0;
      routes[route].serverErrors[i] = 0;
    }
    for (const [field, text] of Object.entries(counts)) {
      const [route, status] = field.split(':') as [LiveRoute, string];
      if (!routes[route]) continue;
      const n = Number(text);
      routes[route].total[i] += n;
      if (status.startsWith('4')) routes[route].clientErrors[i] += n;
      if (status.startsWith('5')) routes[route].serverErrors[i] += n;
    }
  });
  return { minutes: range, routes };
}

export interface DeadLetterView {
  environmentId: string;
  pathValue: string | null;
  messageId: string;
  event: string;
  userId: string | null;
  receivedAt: number;
  failedAt: number | null;
  error: string;
}

/** The dead-letter queue's failed jobs (one per refused event), newest first, with their environment's path value. */
export async function deadLetters(queue: Queue<DeadLetterJob>, db: Db, limit = 100): Promise<DeadLetterView[]> {
  const jobs = (await queue.getJobs(['failed'], 0, limit - 1)).filter((job) => job?.data?.event);
  const ids = [...new Set(jobs.map((job) => job.data.event.environmentId))];
  const environments = ids.length ? await db.environment.findMany({ where: { id: { in: ids } }, select: { id: true, pathValue: true } }) : [];
  const paths = new Map(environments.map((e) => [e.id, e.pathValue]));
  return jobs.map((job) => {
    const event = fromQueue(job.data.event);
    return {
      environmentId: job.data.event.environmentId,
      pathValue: paths.get(job.data.event.environmentId) ?? null,
      messageId: event.messageId,
      event: event.event,
      userId: event.userId ?? event.anonymousId,
      receivedAt: event.receivedAt,
      failedAt: job.finishedOn ?? null,
      error: job.failedReason ?? job.data.error ?? '',
    };
  });
}
