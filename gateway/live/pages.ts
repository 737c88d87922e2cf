// The dashboard's live view beside bull-board (`intake dashboard`, under /live): the newest
// events of an environment with a filter by messageId or userId, the newest Identify calls
// (user, applied / duplicate / conflict, the traits' names it changed), the answers per minute
// of each API over the last hour, and the dead letters with a retry button unless the
// dashboard is read-only. Personal data is shown only to whom gateway/live/access.ts allows.
// What a page costs does not grow with what the queues carry (job-digests.ts), and viewers of the
// same page share one read (shared-read.ts).
import type { Queue } from 'bullmq';
import type Koa from 'koa';
import type { Config } from '../../platform/config.ts';
import type { Db } from '../../platform/db.ts';
import { isDeadLetterJobId, retryDeadLetter } from '../../events/dead-letter-retry.ts';
import { LIVE_ROUTES, liveKeyPrefix } from '../../platform/live-keys.ts';
import type { DeadLetterJob, EventBatchJob } from '../../events/jobs.ts';
import type { Redis } from '../../platform/redis.ts';
import { readBody, type ConsoleState } from '../console/auth.ts';
import { retryDeadLetterAudited } from '../console/dead-letter-actions.ts';
import { sameOrigin, seesPersonalData } from './access.ts';
import {
  answerRates,
  deadLetters,
  environmentByPath,
  environmentEvents,
  identifyCalls,
  listEnvironments,
  type EnvironmentChoice,
  type EventFilter,
  type Unread,
} from './data.ts';
import { callerText, esc, HIDDEN, linePlot, mono, page, pill, startPage, table, when } from './html.ts';
import { createJobDigests, type JobDigests } from './job-digests.ts';
import { createSharedReads, type SharedReads } from './shared-read.ts';

export interface LivePagesDeps {
  config: Pick<Config, 'queuePrefix' | 'redisClusterNodes' | 'dashboardPassword' | 'dashboardReadOnly' | 'liveIdentifyCalls'>;
  db: Db;
  redis: Redis;
  /** Every partition of the events queue. */
  eventsQueues: Queue<EventBatchJob>[];
  deadLetterQueue: Queue<DeadLetterJob>;
}

const LIMIT = 50;
const REFRESH_SECONDS = 5;
/** How long viewers share a read: under the reload interval, so each tab still sees a newer one. */
const SHARED_READ_MS = 2000;
/** Bytes of queued jobs' data one read takes (job-digests.ts); the rest is read by the next ones. */
const QUEUED_BYTES_PER_READ = 32 * 1_048_576;
/** The heads of queued events kept between reads. */
const QUEUED_HEADS_BYTES = 8 * 1_048_576;
const COLORS: Record<string, string> = { track: '#2f6fde', identify: '#17a34a', profiles: '#d97706' };

interface View {
  personal: boolean;
  /** ?refresh=0 turns the page's reload off (a screenshot, a long look). */
  refresh: number | undefined;
}

/** What the pages read through: the live view's dependencies, its queue digests and its shared reads. */
type Reads = LivePagesDeps & { digests: JobDigests; shared: SharedReads };

/** GET /live/… pages and POST /live/dead-letters/retry; anything else goes on to bull-board. */
export function livePages(deps: LivePagesDeps): Koa.Middleware {
  const reads: Reads = {
    ...deps,
    digests: createJobDigests({ redis: deps.redis, bytesPerRead: QUEUED_BYTES_PER_READ, cacheBytes: QUEUED_HEADS_BYTES }),
    shared: createSharedReads({ ttlMs: SHARED_READ_MS, maxKeys: 256 }),
  };
  const routes: Record<string, (ctx: Koa.Context, view: View) => Promise<void>> = {
    '/live/events': (ctx, view) => eventsPage(reads, ctx, view),
    '/live/identify': (ctx, view) => identifyPage(reads, ctx, view),
    '/live/rates': (ctx, view) => ratesPage(reads, ctx, view),
    '/live/dead-letters': (ctx, view) => deadLettersPage(reads, ctx, view),
  };
  return async function live(ctx, next) {
    if (ctx.path === '/live' || ctx.path === '/live/') return ctx.redirect('/live/events');
    if (ctx.path === '/live/dead-letters/retry') return retry(reads, ctx);
    const route = routes[ctx.path];
    if (!route) return next();
    if (!startPage(ctx)) return;
    const view = {
      personal: seesPersonalData(deps.config, ctx.state as ConsoleState),
      refresh: ctx.query.refresh === '0' ? undefined : REFRESH_SECONDS,
    };
    await route(ctx, view);
  };
}

const text = (value: unknown) => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

/** The environment a page is about (`?env=<path value>`), the choices, and the filter (`?q=…&by=messageId|userId`). */
type PageSelection = Awaited<ReturnType<typeof selection>>;

async function selection(deps: Reads, ctx: Koa.Context) {
  const choices = await deps.shared.get('environments', () => listEnvironments(deps.db));
  const asked = text(ctx.query.env);
  const env = asked ? await deps.shared.get(`environment:${asked}`, () => environmentByPath(deps.db, asked)) : (choices[0] ?? null);
  const q = text(ctx.query.q);
  const by = ctx.query.by === 'userId' ? 'userId' : 'messageId';
  const filter: EventFilter = q === undefined ? {} : { [by]: q };
  return { choices, asked, env, q, by, filter } as const;
}

function filterForm(path: string, sel: Awaited<ReturnType<typeof selection>>, personal: boolean): string {
  const options = sel.choices.map((c) => `<option value="${esc(c.pathValue)}">${esc(c.org)}${c.removed ? ' (removed)' : ''}</option>`).join('');
  const byUser = personal ? `<option value="userId"${sel.by === 'userId' ? ' selected' : ''}>userId</option>` : '';
  return `<form class="filter" method="get" action="${path}">
<label>environment <input name="env" list="environments" value="${esc(sel.env?.pathValue ?? sel.asked ?? '')}" size="28"></label><datalist id="environments">${options}</datalist>
<select name="by"><option value="messageId"${sel.by === 'messageId' ? ' selected' : ''}>messageId</option>${byUser}</select>
<input name="q" value="${esc(sel.q ?? '')}" placeholder="filter" size="30"><button type="submit">Show</button></form>`;
}

function noEnvironment(sel: { asked: string | undefined }): string {
  return `<p class="note">${sel.asked ? `No environment with the path value ${callerText(sel.asked)}.` : 'No environment yet: create an organization (intake org create).'}</p>`;
}

/** Says how much of the queue a read left for the next ones (their events show then). */
function unreadNote(unread: Unread): string {
  if (!unread.jobs) return '';
  const mb = (unread.bytes / 1_048_576).toFixed(1);
  return `<p class="note">${unread.jobs} queued job${unread.jobs === 1 ? '' : 's'} (${mb} MB) not read yet: a page reads at most ${QUEUED_BYTES_PER_READ / 1_048_576} MB of queued jobs, and the next reloads read the rest.</p>`;
}

/** The key of a shared read: the page, the environment and the filter. */
const readKey = (page: string, sel: { env: EnvironmentChoice; by: string; q: string | undefined }) =>
  `${page}:${sel.env.id}${sel.q === undefined ? '' : `:${sel.by}:${sel.q}`}`;

function environmentLine(env: EnvironmentChoice): string {
  return `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}${env.removed ? ' (removed)' : ''}.</p>`;
}

/**
 * A page of one environment's recent entries, filtered by messageId or userId: the filter form,
 * then a userId filter refused to a viewer without personal data, the environment chooser, or
 * what `entries` renders for the chosen environment.
 */
async function filteredPage(
  deps: Reads,
  ctx: Koa.Context,
  view: View,
  where: { title: string; path: string },
  entries: (sel: PageSelection & { env: EnvironmentChoice }) => Promise<string>,
) {
  const sel = await selection(deps, ctx);
  let body = filterForm(where.path, sel, view.personal);
  if (sel.by === 'userId' && sel.q !== undefined && !view.personal) {
    ctx.status = 403;
    body += `<p class="note">Filtering by userId shows personal data: sign in (DASHBOARD_PASSWORD).</p>`;
  } else if (!sel.env) {
    body += noEnvironment(sel);
  } else {
    body += environmentLine(sel.env) + (await entries({ ...sel, env: sel.env }));
  }
  ctx.body = page({ title: where.title, path: where.path, body, refreshSeconds: view.refresh });
}

function eventsPage(deps: Reads, ctx: Koa.Context, view: View) {
  return filteredPage(deps, ctx, view, { title: 'Events', path: '/live/events' }, async (sel) => {
    const { events, unread } = await deps.shared.get(readKey('events', sel), () =>
      environmentEvents(deps.db, deps.eventsQueues, deps.digests, sel.env.id, sel.filter, LIMIT),
    );
    const who = (e: { userId: string | null; anonymousId: string | null }) =>
      !view.personal
        ? HIDDEN
        : e.userId !== null
          ? mono(e.userId)
          : e.anonymousId !== null
            ? `${mono(e.anonymousId)} <span class="note">(anonymous)</span>`
            : '';
    return (
      table(
        ['received', 'event', 'messageId', 'user', 'status'],
        events.map((e) => [
          when(e.receivedAt),
          callerText(e.event),
          mono(e.messageId),
          who(e),
          pill(e.status) + (e.error && view.personal ? ` <span class="note">${callerText(e.error)}</span>` : ''),
        ]),
        sel.q === undefined ? 'No event received yet in this environment.' : 'No event matches.',
      ) +
      unreadNote(unread) +
      `<p class="note">Stored events newest first, with the ones still queued (pending); a userId is looked for among the newest 100 000.</p>`
    );
  });
}

function identifyPage(deps: Reads, ctx: Koa.Context, view: View) {
  return filteredPage(deps, ctx, view, { title: 'Identify calls', path: '/live/identify' }, async (sel) => {
    const calls = await deps.shared.get(readKey('identify', sel), () => identifyCalls(deps.redis, liveKeyPrefix(deps.config), sel.env.id, sel.filter, LIMIT));
    return (
      table(
        ['recorded', 'user', 'messageId', 'outcome', 'traits changed'],
        calls.map((c) => [when(c.at), view.personal ? mono(c.userId) : HIDDEN, mono(c.messageId), pill(c.outcome), c.changed.map(callerText).join(', ')]),
        deps.config.liveIdentifyCalls === 0 ? 'Identify calls are not recorded (LIVE_IDENTIFY_CALLS=0).' : 'No Identify call in the last hour.',
      ) +
      `<p class="note">The gateways record the newest ${deps.config.liveIdentifyCalls} calls of each environment, for an hour, about a second after they are answered (LIVE_IDENTIFY_CALLS).</p>`
    );
  });
}

async function ratesPage(deps: Reads, ctx: Koa.Context, view: View) {
  const { minutes, routes } = await deps.shared.get('rates', () => answerRates(deps.redis, liveKeyPrefix(deps.config), Date.now()));
  const labels = minutes.map((m, i) => (i % 10 === 0 || i === minutes.length - 1 ? new Date(m * 60_000).toISOString().slice(11, 16) : ''));
  const plot = linePlot(
    LIVE_ROUTES.map((route) => ({ name: route, color: COLORS[route], values: routes[route].total })),
    labels,
    'answers per minute',
  );
  const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);
  const rows = LIVE_ROUTES.map((route) => {
    const r = routes[route];
    return [esc(route), String(r.total.at(-1) ?? 0), String(sum(r.total)), String(sum(r.clientErrors)), String(sum(r.serverErrors))].map((c, i) =>
      i === 0 ? c : `<span class="mono" data-route="${route}" data-column="${i}">${c}</span>`,
    );
  });
  const body = `${plot}${table(['API', 'this minute', 'last hour', '4xx in the hour', '5xx in the hour'], rows, '')}
<p class="note">Every gateway adds its answers to the current minute every 10 s. The hour is UTC.</p>`;
  ctx.body = page({ title: 'Rates', path: '/live/rates', body, refreshSeconds: view.refresh ? 10 : undefined });
}

async function deadLettersPage(deps: Reads, ctx: Koa.Context, view: View) {
  const { letters, unread } = await deps.shared.get(DEAD_LETTERS_READ, () => deadLetters(deps.deadLetterQueue, deps.digests, deps.db));
  const flash = text(ctx.query.retried) ? `<div class="flash">${callerText(ctx.query.retried)} is being retried.</div>` : '';
  const canRetry = !deps.config.dashboardReadOnly;
  // The form names the dead letter by its job id (ASCII): a messageId may hold characters a form
  // field does not carry back as they were, or be longer than a page keeps of it.
  // Signed in as an operator, each change carries the session's CSRF token (gateway/console/auth.ts).
  const csrf = (ctx.state as ConsoleState).csrfToken;
  const csrfField = csrf ? `<input type="hidden" name="_csrf" value="${esc(csrf)}">` : '';
  const retryButton = (l: { jobId: string }) =>
    `<form method="post" action="/live/dead-letters/retry"><input type="hidden" name="job" value="${esc(l.jobId)}">${csrfField}<button type="submit">Retry</button></form>`;
  const headers = ['failed', 'environment', 'event', 'messageId', 'user', 'why', ...(canRetry ? [''] : [])];
  const rows = letters.map((l) => [
    l.failedAt === null ? '' : when(l.failedAt),
    mono(l.pathValue ?? l.environmentId),
    callerText(l.event),
    mono(l.messageId),
    view.personal ? mono(l.userId ?? '') : HIDDEN,
    view.personal ? callerText(l.error) : HIDDEN,
    ...(canRetry ? [retryButton(l)] : []),
  ]);
  const note = canRetry
    ? 'Retry sends the event through the worker once more (as intake events retry does); fix what refused it first.'
    : 'Read-only (DASHBOARD_READ_ONLY): retry each with intake events retry <org> <messageId>, or set DASHBOARD_READ_ONLY=false.';
  ctx.body = page({
    title: 'Dead letters',
    path: '/live/dead-letters',
    body: `${flash}${table(headers, rows, 'No dead letter.')}${unreadNote(unread)}<p class="note">${esc(note)}</p>`,
    refreshSeconds: view.refresh,
  });
}

const DEAD_LETTERS_READ = 'dead-letters';

/** POST /live/dead-letters/retry (a form of the dead-letters page): 405 when read-only, 403 from another site. */
async function retry(deps: Reads, ctx: Koa.Context) {
  if (ctx.method !== 'POST') {
    ctx.status = 405;
    ctx.set('Allow', 'POST');
    return;
  }
  if (deps.config.dashboardReadOnly) {
    ctx.status = 405;
    ctx.body = 'The dashboard is read-only (DASHBOARD_READ_ONLY).';
    return;
  }
  if (!sameOrigin({ origin: ctx.get('origin') || undefined, 'sec-fetch-site': ctx.get('sec-fetch-site') || undefined, host: ctx.get('host') })) {
    ctx.status = 403;
    ctx.body = 'Forbidden: not sent from the dashboard.';
    return;
  }
  // The operators' gate has read a form already, for its CSRF token.
  const form = new URLSearchParams((ctx.state as ConsoleState).form ?? (await readBody(ctx.req, 16_384)));
  const jobId = form.get('job') ?? '';
  if (!isDeadLetterJobId(jobId)) {
    ctx.status = 400;
    ctx.body = 'job is required';
    return;
  }
  // Signed in as an operator, the retry is audited with the operator's name, as from the console.
  const operator = (ctx.state as ConsoleState).operator;
  const event = operator ? await retryDeadLetterAudited(deps, operator.name, jobId) : await retryDeadLetter(deps.deadLetterQueue, deps.db, jobId);
  if (!event) {
    ctx.status = 409;
    ctx.body = 'this dead letter has not failed';
    return;
  }
  deps.shared.forget(DEAD_LETTERS_READ);
  const messageId = event.messageId;
  ctx.status = 303;
  ctx.redirect(`/live/dead-letters?retried=${encodeURIComponent(messageId)}`);
}
