// The console's events pages: /console/events searches an environment's stored events (by name,
// userId or anonymousId, status, time range), newest first, a page at a time by key
// (events/event-search.ts), with the events still queued shown first as `pending`;
// /console/event shows one event: its stored JSON, status, journey size-limit flag and what the
// worker did with it (stored when, the journey runs it started). The search, and a failed event's
// page, link to the environment's dead letters (dead-letters.ts), where it is retried.
import type Koa from 'koa';
import { eventDetail, formatEventKey, parseEventKey, searchEvents, SEARCH_SCAN, type EventSearch } from '../../../events/event-search.ts';
import { environmentByPath, listEnvironments, type EnvironmentChoice } from '../../live/data.ts';
import { callerText, esc, HIDDEN, mono, pill, table, when } from '../../live/html.ts';
import { hiddenWhy, showsPersonalData } from './access.ts';
import { DEAD_LETTERS_PATH } from '../console-paths.ts';
import type { PagesDeps } from './deps.ts';
import { queuedEvents } from './queued.ts';
import { consolePage, fields, jsonBlock, query, yesNo } from './view.ts';

export const EVENTS_PATH = '/console/events';
export const EVENT_PATH = '/console/event';

/** Events a page shows. */
export const PAGE_SIZE = 50;

const text = (value: unknown) => (typeof value === 'string' && value.trim() ? value.trim() : undefined);
/** A caller's value as typed (not trimmed: an ID may begin or end with spaces). */
const raw = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);

/** `2026-12-06T10:30` (a datetime-local field, UTC) or epoch ms → epoch ms. */
function instant(value: unknown): number | undefined {
  const t = text(value);
  if (t === undefined) return undefined;
  if (/^\d{1,15}$/.test(t)) return Number(t);
  const ms = Date.parse(/[zZ]|[+-]\d\d:?\d\d$/.test(t) ? t : `${t}Z`);
  return Number.isFinite(ms) ? ms : undefined;
}

const asLocal = (ms: number | undefined) => (ms === undefined ? '' : new Date(ms).toISOString().slice(0, 19));

/** The environment asked for (`?env=<path value>`), else the newest; and the choices. */
export async function chosenEnvironment(deps: PagesDeps, ctx: Koa.Context) {
  const choices = await listEnvironments(deps.db);
  const asked = text(ctx.query.env);
  const env: EnvironmentChoice | null = asked ? await environmentByPath(deps.db, asked) : (choices[0] ?? null);
  return { choices, asked, env };
}

export function environmentField(sel: { choices: EnvironmentChoice[]; asked?: string; env: EnvironmentChoice | null }): string {
  const options = sel.choices.map((c) => `<option value="${esc(c.pathValue)}">${esc(c.org)}${c.removed ? ' (removed)' : ''}</option>`).join('');
  return `<label>environment <input name="env" list="environments" value="${esc(sel.env?.pathValue ?? sel.asked ?? '')}" size="24"></label><datalist id="environments">${options}</datalist>`;
}

export function noEnvironment(asked: string | undefined): string {
  return `<p class="note">${asked ? `No environment with the path value ${callerText(asked)}.` : 'No environment yet: create an organization (intake org create).'}</p>`;
}

export const eventLink = (pathValue: string, messageId: string, label: string) =>
  `<a href="${EVENT_PATH}${esc(query({ env: pathValue, id: messageId }))}">${label}</a>`;

/** The failed events are retried from the dead letters' page (dead-letters.ts). */
export const deadLettersLink = (pathValue: string) =>
  `<a href="${DEAD_LETTERS_PATH}${esc(query({ env: pathValue }))}">Dead letters (failed events, with Retry) →</a>`;

export const personLink = (pathValue: string, userId: string, label: string) =>
  `<a href="/console/person${esc(query({ env: pathValue, user: userId }))}">${label}</a>`;

export async function eventsPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const personal = showsPersonalData(ctx, deps.config);
  const sel = await chosenEnvironment(deps, ctx);
  const name = raw(ctx.query.event);
  const by = ctx.query.by === 'anonymousId' ? 'anonymousId' : 'userId';
  const who = raw(ctx.query.who);
  const status = ['pending', 'processed', 'failed'].includes(String(ctx.query.status))
    ? (String(ctx.query.status) as 'pending' | 'processed' | 'failed')
    : undefined;
  const from = instant(ctx.query.from);
  const to = instant(ctx.query.to);
  const before = parseEventKey(ctx.query.before);

  const statusOptions = ['', 'pending', 'processed', 'failed']
    .map((s) => `<option value="${s}"${(status ?? '') === s ? ' selected' : ''}>${s || 'any status'}</option>`)
    .join('');
  const form = `<form class="filter" method="get" action="${EVENTS_PATH}">${environmentField(sel)}
<label>event <input name="event" value="${esc(name ?? '')}" size="16"></label>
<select name="by"><option value="userId"${by === 'userId' ? ' selected' : ''}>userId</option><option value="anonymousId"${by === 'anonymousId' ? ' selected' : ''}>anonymousId</option></select>
<input name="who" value="${esc(who ?? '')}" size="18" placeholder="${personal ? 'user' : 'hidden'}"${personal ? '' : ' disabled'}>
<select name="status">${statusOptions}</select>
<label>from <input name="from" type="datetime-local" step="1" value="${esc(asLocal(from))}"></label>
<label>to <input name="to" type="datetime-local" step="1" value="${esc(asLocal(to))}"></label>
<button type="submit">Search</button></form>`;

  let body = form;
  if (who !== undefined && !personal) {
    ctx.status = 403;
    body += `<p class="note">Searching by ${esc(by)} shows personal data: ${esc(hiddenWhy(ctx))}.</p>`;
  } else if (!sel.env) {
    if (sel.asked) ctx.status = 404;
    body += noEnvironment(sel.asked);
  } else {
    body += await results(deps, sel.env, personal, { name, by, who, status, from, to, before });
  }
  ctx.body = consolePage({ title: 'Stored events', path: EVENTS_PATH, body });
}

async function results(
  deps: PagesDeps,
  env: EnvironmentChoice,
  personal: boolean,
  f: {
    name?: string;
    by: 'userId' | 'anonymousId';
    who?: string;
    status?: 'pending' | 'processed' | 'failed';
    from?: number;
    to?: number;
    before?: ReturnType<typeof parseEventKey>;
  },
): Promise<string> {
  const who = (e: { userId: string | null; anonymousId: string | null }) => whoCell(personal, env.pathValue, e);
  const search: EventSearch = {
    environmentId: env.id,
    event: f.name,
    ...(f.who === undefined ? {} : f.by === 'userId' ? { userId: f.who } : { anonymousId: f.who }),
    status: f.status === 'pending' ? undefined : f.status,
    from: f.from,
    to: f.to,
    before: f.before,
    limit: PAGE_SIZE,
  };
  const stored = f.status === 'pending' ? null : await searchEvents(deps.db, search);
  let out = `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}${env.removed ? ' (removed)' : ''}. ${deadLettersLink(env.pathValue)}</p>`;

  // The queued events come first, on the first page only (they are not stored yet: no key orders them among the stored).
  if (!f.before && (f.status === undefined || f.status === 'pending')) {
    const queued = await queuedEvents(deps.eventsQueues, deps.digests, env.id, { event: f.name, ...(f.who === undefined ? {} : { [f.by]: f.who }) }, PAGE_SIZE);
    const storedIds = new Set(stored?.events.map((e) => e.messageId));
    const shown = queued.events.filter(
      (h) => !storedIds.has(h.messageId.value) && (f.from === undefined || h.receivedAt >= f.from) && (f.to === undefined || h.receivedAt < f.to),
    );
    if (shown.length || f.status === 'pending') {
      out += `<h2>Queued (pending)</h2>`;
      out += table(
        ['received', 'event', 'messageId', 'user', 'status'],
        shown.map((h) => [
          when(h.receivedAt),
          callerText(h.event.value),
          h.messageId.whole ? eventLink(env.pathValue, h.messageId.value, mono(h.messageId.value)) : mono(h.messageId.value),
          who({ userId: h.userId?.value ?? null, anonymousId: h.anonymousId?.value ?? null }),
          pill('pending'),
        ]),
        'No queued event matches.',
      );
      if (queued.unread.jobs)
        out += `<p class="note">${queued.unread.jobs} queued job${queued.unread.jobs === 1 ? '' : 's'} not read yet (a read takes a bounded share of the queue): reload to read on.</p>`;
    }
  }
  if (!stored) return out;

  out += `<h2>Stored</h2>`;
  out += table(
    ['received', 'event', 'messageId', 'user', 'status'],
    stored.events.map((e) => [
      eventLink(env.pathValue, e.messageId, when(e.receivedAt)),
      callerText(e.event),
      eventLink(env.pathValue, e.messageId, mono(e.messageId)),
      who(e),
      pill(e.status) + (e.error && personal ? ` <span class="note">${callerText(e.error)}</span>` : ''),
    ]),
    stored.scannedOut ? 'None among these events: the next page looks further.' : 'No stored event matches.',
  );
  const base = { env: env.pathValue, event: f.name, by: f.who === undefined ? undefined : f.by, who: f.who, status: f.status, from: f.from, to: f.to };
  const links = [
    f.before ? `<a href="${EVENTS_PATH}${esc(query(base))}">Newest</a>` : '',
    stored.next ? `<a href="${EVENTS_PATH}${esc(query({ ...base, before: formatEventKey(stored.next) }))}" rel="next">Older →</a>` : '',
  ].join('');
  out += `<div class="pager">${links}</div>`;
  if (stored.scannedOut)
    out += `<p class="note">A filter by event name, anonymousId or status looks through ${SEARCH_SCAN.toLocaleString('en')} events per page; older ones are on the next page.</p>`;
  return out;
}

export async function eventPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const personal = showsPersonalData(ctx, deps.config);
  const sel = await chosenEnvironment(deps, ctx);
  const messageId = raw(ctx.query.id);
  let body = '';
  if (!sel.env || !sel.asked) {
    ctx.status = 404;
    body = noEnvironment(sel.asked);
  } else if (messageId === undefined) {
    ctx.status = 400;
    body = `<p class="note">Which event: ?env=&lt;path value&gt;&amp;id=&lt;messageId&gt;.</p>`;
  } else {
    body = await oneEvent(deps, ctx, sel.env, messageId, personal);
  }
  ctx.body = consolePage({ title: 'Event', path: EVENT_PATH, body });
}

async function oneEvent(deps: PagesDeps, ctx: Koa.Context, env: EnvironmentChoice, messageId: string, personal: boolean): Promise<string> {
  const e = await eventDetail(deps.db, env.id, messageId);
  const back = `<p class="note"><a href="${EVENTS_PATH}${esc(query({ env: env.pathValue }))}">← events of ${mono(env.pathValue)}</a></p>`;
  if (!e) {
    const queued = await queuedEvents(deps.eventsQueues, deps.digests, env.id, { messageId }, 1);
    const h = queued.events[0];
    if (!h) {
      ctx.status = 404;
      return `${back}<p class="note">No event ${mono(messageId)} is stored or queued in ${mono(env.pathValue)}.</p>`;
    }
    return (
      back +
      fields([
        ['messageId', mono(h.messageId.value)],
        ['event', callerText(h.event.value)],
        ['status', pill('pending')],
        ['received', when(h.receivedAt)],
        ['user', personal ? (h.userId ? mono(h.userId.value) : h.anonymousId ? `${mono(h.anonymousId.value)} (anonymous)` : '') : HIDDEN],
      ]) +
      `<p class="note">Queued: a worker has not stored it yet. Its payload shows here once stored (the queue's copy stays in Redis).</p>`
    );
  }
  const user = whoCell(personal, env.pathValue, e);
  const worker = [
    e.status === 'processed' ? `stored at ${when(e.processedAt)}` : `refused at ${when(e.processedAt)}`,
    // drives_journeys: a userId and within the journey limits (events/journey-limits.ts); journeys_at: a published journey used its name.
    !e.drivesJourneys
      ? 'drives no journey (no userId, or over the journey size limits)'
      : e.journeysAt === null
        ? 'may drive journeys: not taken by the journey engine (no published journey uses its name, or not yet)'
        : `taken by the journey engine at ${when(e.journeysAt)}`,
    `${e.runsStarted.length} journey run${e.runsStarted.length === 1 ? '' : 's'} started`,
  ];
  return (
    back +
    fields([
      ['messageId', mono(e.messageId)],
      ['event', callerText(e.event)],
      [
        'status',
        pill(e.status) + (e.error ? ` ${personal ? callerText(e.error) : HIDDEN}` : '') + (e.status === 'failed' ? ` ${deadLettersLink(env.pathValue)}` : ''),
      ],
      ['received', when(e.receivedAt)],
      ['timestamp', when(e.timestamp)],
      ['user', user],
      ['within journey limits', e.withinLimits ? yesNo(true) : `${yesNo(false)} ${callerText(e.limitReason ?? '')}`],
      ['worker', worker.map(esc).join('; ')],
    ]) +
    (e.runsStarted.length
      ? `<h2>Journey runs it started</h2>` +
        table(
          ['journey', 'run', 'status', 'step', 'entered'],
          e.runsStarted.map((r) => [callerText(r.journey), mono(r.id), pill(r.status), String(r.step), when(r.enteredAt)]),
          '',
        )
      : '') +
    `<h2>Stored JSON</h2>` +
    (personal ? jsonBlock(e.payload) : `<p class="note">${HIDDEN}: ${esc(hiddenWhy(ctx))}.</p>`)
  );
}

/** Who an event is of: the user ID linking to the person's page, or the anonymous ID; hidden where personal data is. */
function whoCell(personal: boolean, pathValue: string, e: { userId: string | null; anonymousId: string | null }): string {
  if (!personal) return HIDDEN;
  if (e.userId !== null) return personLink(pathValue, e.userId, mono(e.userId));
  return e.anonymousId !== null ? `${mono(e.anonymousId)} <span class="note">(anonymous)</span>` : '';
}
