// What the live pages show, read when a page is asked for, each read bounded: the newest events
// of an environment (PostgreSQL, its received_at index, and the heads of the events of the batches
// still queued: job-digests.ts), the Identify calls gateways recorded (a Redis stream per
// environment), the answers per minute of the last hour (one Redis hash per minute), and the
// dead-letter queue (the heads of its events, its jobs' reasons).
import type { Queue } from 'bullmq';
import type { Db } from '../../platform/db.ts';
import { identifyCallsKey, LIVE_ROUTES, minuteOf, ratesKey, type LiveRoute } from '../../platform/live-keys.ts';
import type { DeadLetterJob, EventBatchJob } from '../../events/jobs.ts';
import type { Redis } from '../../platform/redis.ts';
import { recentEvents, type RecentEvent } from '../../events/event-store.ts';
import { fieldIs, headIdentity, type EventHead, type HeadField } from './batch-digest.ts';
import { unreadOf, type JobDigests, type Listing } from './job-digests.ts';

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

/** How many queued batch jobs of each state a page looks through for events not stored yet. */
const QUEUED_JOBS_READ = 100;

/** Jobs a read left for later (job-digests.ts): their events show once a later read reaches them. */
export type Unread = Listing['unread'];

function fromHead(head: EventHead): RecentEvent {
  return {
    event: head.event.value,
    messageId: head.messageId.value,
    userId: head.userId?.value ?? null,
    anonymousId: head.anonymousId?.value ?? null,
    status: 'pending',
    receivedAt: head.receivedAt,
    error: null,
  };
}

/** The newest events of an environment, stored or still queued (`pending`) in any partition, newest first. */
export async function environmentEvents(
  db: Db,
  queues: Queue<EventBatchJob>[],
  digests: JobDigests,
  environmentId: string,
  filter: EventFilter,
  limit: number,
): Promise<{ events: RecentEvent[]; unread: Unread }> {
  const [stored, ...perPartition] = await Promise.all([
    recentEvents(db, environmentId, filter, limit),
    ...queues.map((queue) => digests.list(queue, ['active', 'waiting', 'prioritized', 'delayed'], QUEUED_JOBS_READ)),
  ]);
  const storedIds = new Set(stored.map((e) => e.messageId));
  // A queued event already stored (a batch being stored), or queued twice (a retried enqueue), shows once.
  const isStored = (id: HeadField) => (id.whole ? storedIds.has(id.value) : [...storedIds].some((stored) => fieldIs(id, stored)));
  const seen = new Set<string>();
  const shown: EventHead[] = [];
  for (const job of perPartition.flatMap((listing) => listing.jobs)) {
    for (const head of job.heads ?? []) {
      if (head.environmentId !== environmentId) continue;
      if (filter.messageId !== undefined && !fieldIs(head.messageId, filter.messageId)) continue;
      if (filter.userId !== undefined && !fieldIs(head.userId, filter.userId) && !fieldIs(head.anonymousId, filter.userId)) continue;
      const id = headIdentity(head);
      if (seen.has(id) || isStored(head.messageId)) continue;
      seen.add(id);
      shown.push(head);
    }
  }
  const events = [...shown.map(fromHead), ...stored].sort((a, b) => b.receivedAt - a.receivedAt).slice(0, limit);
  return { events, unread: unreadOf(perPartition) };
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
  jobId: string;
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
export async function deadLetters(
  queue: Queue<DeadLetterJob>,
  digests: JobDigests,
  db: Db,
  limit = 100,
): Promise<{ letters: DeadLetterView[]; unread: Unread }> {
  const { jobs, unread } = await digests.list(queue, ['failed'], limit, ['finishedOn', 'failedReason']);
  const letters = jobs
    .filter((job) => job.heads?.length)
    .map((job) => ({ jobId: job.id, head: job.heads![0], finishedOn: job.fields.finishedOn, failedReason: job.fields.failedReason }))
    .sort((a, b) => Number(b.finishedOn ?? 0) - Number(a.finishedOn ?? 0));
  const ids = [...new Set(letters.map((l) => l.head.environmentId))];
  const environments = ids.length ? await db.environment.findMany({ where: { id: { in: ids } }, select: { id: true, pathValue: true } }) : [];
  const paths = new Map(environments.map((e) => [e.id, e.pathValue]));
  return {
    unread,
    letters: letters.map(({ jobId, head, finishedOn, failedReason }) => ({
      jobId,
      environmentId: head.environmentId,
      pathValue: paths.get(head.environmentId) ?? null,
      messageId: head.messageId.value,
      event: head.event.value,
      userId: head.userId?.value ?? head.anonymousId?.value ?? null,
      receivedAt: head.receivedAt,
      failedAt: finishedOn ? Number(finishedOn) : null,
      error: failedReason ?? '',
    })),
  };
}
