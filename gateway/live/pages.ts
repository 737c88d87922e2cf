// The dashboard's live view beside bull-board (`intake dashboard`, under /live): the newest
// events of an environment with a filter by messageId or userId, the newest Identify calls
// (user, applied / duplicate / conflict, the traits' names it changed), the answers per minute
// of each API over the last hour, and the dead letters with a retry button unless the
// dashboard is read-only. Personal data is shown only to whom gateway/live/access.ts allows.
import type { Queue } from 'bullmq';
import type Koa from 'koa';
import type { Config } from '../../common/config.ts';
import type { Db } from '../../common/db.ts';
import { retryFailedEvent } from '../../common/dead-letter-retry.ts';
import { LIVE_ROUTES, liveKeyPrefix } from '../../common/live-keys.ts';
import type { DeadLetterJob, EventBatchJob } from '../../common/queues.ts';
import type { Redis } from '../../common/redis.ts';
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
} from './data.ts';
import { esc, HIDDEN, linePlot, mono, page, pill, table, when } from './html.ts';

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
const COLORS: Record<string, string> = { track: '#2f6fde', identify: '#17a34a', profiles: '#d97706' };

interface View {
  personal: boolean;
  /** ?refresh=0 turns the page's reload off (a screenshot, a long look). */
  refresh: number | undefined;
}

/** GET /live/… pages and POST /live/dead-letters/retry; anything else goes on to bull-board. */
export function livePages(deps: LivePagesDeps): Koa.Middleware {
  const routes: Record<string, (ctx: Koa.Context, view: View) => Promise<void>> = {
    '/live/events': (ctx, view) => eventsPage(deps, ctx, view),
    '/live/identify': (ctx, view) => identifyPage(deps, ctx, view),
    '/live/rates': (ctx, view) => ratesPage(deps, ctx, view),
    '/live/dead-letters': (ctx, view) => deadLettersPage(deps, ctx, view),
  };
  return async function live(ctx, next) {
    if (ctx.path === '/live' || ctx.path === '/live/') return ctx.redirect('/live/events');
    if (ctx.path === '/live/dead-letters/retry') return retry(deps, ctx);
    const route = routes[ctx.path];
    if (!route) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET');
      return;
    }
    const view = {
      personal: seesPersonalData(deps.config),
      refresh: ctx.query.refresh === '0' ? undefined : REFRESH_SECONDS,
    };
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'html';
    await route(ctx, view);
  };
}

const text = (value: unknown) => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

/** The environment a page is about (`?env=<path value>`), the choices, and the filter (`?q=…&by=messageId|userId`). */
type PageSelection = Awaited<ReturnType<typeof selection>>;

async function selection(deps: LivePagesDeps, ctx: Koa.Context) {
  const choices = await listEnvironments(deps.db);
  const asked = text(ctx.query.env);
  const env = asked ? await environmentByPath(deps.db, asked) : (choices[0] ?? null);
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
  return `<p class="note">${sel.asked ? `No environment with the path value ${esc(sel.asked)}.` : 'No environment yet: create an organization (intake org create).'}</p>`;
}

function environmentLine(env: EnvironmentChoice): string {
  return `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}${env.removed ? ' (removed)' : ''}.</p>`;
}

/**
 * A page of one environment's recent entries, filtered by messageId or userId: the filter form,
 * then a userId filter refused to a viewer without personal data, the environment chooser, or
 * what `entries` renders for the chosen environment.
 */
async function filteredPage(
  deps: LivePagesDeps,
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

function eventsPage(deps: LivePagesDeps, ctx: Koa.Context, view: View) {
  return filteredPage(deps, ctx, view, { title: 'Events', path: '/live/events' }, async (sel) => {
    const events = await environmentEvents(deps.db, deps.eventsQueues, sel.env.id, sel.filter, LIMIT);
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
          esc(e.event),
          mono(e.messageId),
          who(e),
          pill(e.status) + (e.error && view.personal ? ` <span class="note">${esc(e.error)}</span>` : ''),
        ]),
        sel.q === undefined ? 'No event received yet in this environment.' : 'No event matches.',
      ) + `<p class="note">Stored events newest first, with the ones still queued (pending); a userId is looked for among the newest 100 000.</p>`
    );
  });
}

function identifyPage(deps: LivePagesDeps, ctx: Koa.Context, view: View) {
  return filteredPage(deps, ctx, view, { title: 'Identify calls', path: '/live/identify' }, async (sel) => {
    const calls = await identifyCalls(deps.redis, liveKeyPrefix(deps.config), sel.env.id, sel.filter, LIMIT);
    return (
      table(
        ['recorded', 'user', 'messageId', 'outcome', 'traits changed'],
        calls.map((c) => [when(c.at), view.personal ? mono(c.userId) : HIDDEN, mono(c.messageId), pill(c.outcome), c.changed.map(esc).join(', ')]),
        deps.config.liveIdentifyCalls === 0 ? 'Identify calls are not recorded (LIVE_IDENTIFY_CALLS=0).' : 'No Identify call in the last hour.',
      ) +
      `<p class="note">The gateways record the newest ${deps.config.liveIdentifyCalls} calls of each environment, for an hour, about a second after they are answered (LIVE_IDENTIFY_CALLS).</p>`
    );
  });
}

async function ratesPage(deps: LivePagesDeps, ctx: Koa.Context, view: View) {
  const now = Date.now();
  const { minutes, routes } = await answerRates(deps.redis, liveKeyPrefix(deps.config), now);
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

async function deadLettersPage(deps: LivePagesDeps, ctx: Koa.Context, view: View) {
  const letters = await deadLetters(deps.deadLetterQueue, deps.db);
  const flash = text(ctx.query.retried) ? `<div class="flash">${esc(ctx.query.retried)} is being retried.</div>` : '';
  const canRetry = !deps.config.dashboardReadOnly;
  const retryButton = (l: { environmentId: string; messageId: string }) =>
    `<form method="post" action="/live/dead-letters/retry"><input type="hidden" name="env" value="${esc(l.environmentId)}"><input type="hidden" name="messageId" value="${esc(l.messageId)}"><button type="submit">Retry</button></form>`;
  const headers = ['failed', 'environment', 'event', 'messageId', 'user', 'why', ...(canRetry ? [''] : [])];
  const rows = letters.map((l) => [
    l.failedAt === null ? '' : when(l.failedAt),
    mono(l.pathValue ?? l.environmentId),
    esc(l.event),
    mono(l.messageId),
    view.personal ? mono(l.userId ?? '') : HIDDEN,
    view.personal ? esc(l.error) : HIDDEN,
    ...(canRetry ? [retryButton(l)] : []),
  ]);
  const note = canRetry
    ? 'Retry sends the event through the worker once more (as intake events retry does); fix what refused it first.'
    : 'Read-only (DASHBOARD_READ_ONLY): retry each with intake events retry <org> <messageId>, or set DASHBOARD_READ_ONLY=false.';
  ctx.body = page({
    title: 'Dead letters',
    path: '/live/dead-letters',
    body: `${flash}${table(headers, rows, 'No dead letter.')}<p class="note">${esc(note)}</p>`,
    refreshSeconds: view.refresh,
  });
}

/** POST /live/dead-letters/retry (a form of the dead-letters page): 405 when read-only, 403 from another site. */
async function retry(deps: LivePagesDeps, ctx: Koa.Context) {
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
  const form = new URLSearchParams(await readBody(ctx.req, 16_384));
  const env = form.get('env') ?? '';
  const messageId = form.get('messageId') ?? '';
  if (!/^[0-9a-f-]{36}$/i.test(env) || !messageId) {
    ctx.status = 400;
    ctx.body = 'env and messageId are required';
    return;
  }
  const outcome = await retryFailedEvent(deps.deadLetterQueue, deps.db, env, messageId);
  if (outcome === 'not-failed') {
    ctx.status = 409;
    ctx.body = `${messageId} has not failed`;
    return;
  }
  ctx.status = 303;
  ctx.redirect(`/live/dead-letters?retried=${encodeURIComponent(messageId)}`);
}

function readBody(req: NodeJS.ReadableStream, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > limit) reject(Object.assign(new Error('form too large'), { status: 413, expose: true }));
    });
    req.once('end', () => resolve(body));
    req.once('error', reject);
  });
}
