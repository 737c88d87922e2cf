// The console's person page (/console/person?env=<path value>&user=<userId>): the profile's
// traits with when each was last written, the user IDs joined to it, the addresses its calls
// claimed with their consent decisions (basis, expiry), the person's events newest first (by
// key, as the events page), and their journey runs with the messages each sent. Everything on it
// is personal data: it answers only to whom may see that (access.ts).
//
// Actions (export, suppress, unsuppress, forget) are forms, shown to an admin, that post with the
// session's CSRF token to PERSON_ACTIONS_PATH<action>: gateway/console/person-actions.ts submits
// them as the admin API's privacy requests.
import type Koa from 'koa';
import { formatEventKey, parseEventKey, searchEvents } from '../../../events/event-search.ts';
import { personView, PERSON_LIST_LIMIT } from '../../../profiles/person-view.ts';
import { callerText, esc, mono, pill, table, when } from '../../live/html.ts';
import type { ConsoleState } from '../auth.ts';
import { hiddenWhy, showsPersonalData } from './access.ts';
import { chosenEnvironment, eventLink, noEnvironment, PAGE_SIZE } from './events.ts';
import type { PagesDeps } from './deps.ts';
import { consolePage, csrfField, fields, query } from './view.ts';
import { PERSON_ACTIONS_PATH } from '../console-paths.ts';

export const PERSON_PATH = '/console/person';

const raw = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);

export async function personPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const personal = showsPersonalData(ctx, deps.config);
  const sel = await chosenEnvironment(deps, ctx);
  const userId = raw(ctx.query.user);
  const form = `<form class="filter" method="get" action="${PERSON_PATH}">
<label>environment <input name="env" value="${esc(sel.env?.pathValue ?? sel.asked ?? '')}" size="24"></label>
<label>userId <input name="user" value="${esc(personal ? (userId ?? '') : '')}" size="24"${personal ? '' : ' disabled'}></label><button type="submit">Show</button></form>`;
  let body = form;
  if (!personal) {
    if (userId !== undefined) ctx.status = 403;
    body += `<p class="note">A person's page is personal data: ${esc(hiddenWhy(ctx))}.</p>`;
  } else if (!sel.env) {
    if (sel.asked) ctx.status = 404;
    body += noEnvironment(sel.asked);
  } else if (userId === undefined) {
    body += `<p class="note">Type a userId, or follow one from the events page.</p>`;
  } else {
    body += await person(deps, ctx, sel.env, userId);
  }
  ctx.body = consolePage({ title: 'Person', path: PERSON_PATH, body });
}

async function person(deps: PagesDeps, ctx: Koa.Context, env: { id: string; pathValue: string; org: string }, userId: string): Promise<string> {
  const view = await personView(deps.db, env.id, userId);
  const before = parseEventKey(ctx.query.before);
  const events = await searchEvents(deps.db, { environmentId: env.id, userKeys: view.userKeys, before, limit: PAGE_SIZE });
  let out = `<p class="note">Organization ${mono(env.org)}, environment ${mono(env.pathValue)}.</p>`;
  out += actions(ctx, env.pathValue, userId);
  if (!view.profile && !events.events.length && !view.runs.length) {
    ctx.status = 404;
    return out + `<p class="note">Nothing is stored of ${mono(userId)} in ${mono(env.pathValue)}.</p>`;
  }
  const p = view.profile;
  out += fields([
    ['userId', mono(userId)],
    ['joined user IDs', view.userIds.length ? view.userIds.map(mono).join(', ') : '<span class="note">no profile</span>'],
    ...(p
      ? ([
          ['profile', mono(p.id)],
          ['created', when(p.createdAt)],
          ['updated', when(p.updatedAt)],
        ] as [string, string][])
      : []),
  ]);
  if (p) {
    out += `<h2>Traits</h2>`;
    out += table(
      ['trait', 'value', 'last written'],
      Object.entries(p.traits).map(([name, value]) => [
        callerText(name),
        `<span class="mono">${callerText(JSON.stringify(value))}</span>`,
        p.traitWrittenAt[name] === undefined ? '<span class="note">not recorded</span>' : when(p.traitWrittenAt[name]),
      ]),
      'No trait.',
    );
  }
  out += `<h2>Addresses and consent</h2>`;
  out += table(
    ['channel', 'address', 'last claimed', 'consent (purpose: status, basis, expiry)'],
    view.addresses.map((a) => [
      esc(a.channel),
      mono(a.value),
      when(a.at),
      a.consent.length
        ? a.consent
            .map(
              (c) =>
                `${esc(c.purpose)}: ${pill(c.status)} ${esc(c.basis ?? 'no basis')}, ${c.expiresAt === null ? 'no expiry' : `expires ${when(c.expiresAt)}`} <span class="note">(${callerText(c.source)}, decided ${when(c.decidedAt)})</span>`,
            )
            .join('<br>')
        : '<span class="note">no decision</span>',
    ]),
    'No address claimed.',
  );
  out += `<h2>Events</h2>`;
  out += table(
    ['received', 'event', 'messageId', 'status'],
    events.events.map((e) => [
      eventLink(env.pathValue, e.messageId, when(e.receivedAt)),
      callerText(e.event),
      eventLink(env.pathValue, e.messageId, mono(e.messageId)),
      pill(e.status),
    ]),
    'No stored event.',
  );
  const base = { env: env.pathValue, user: userId };
  out += `<div class="pager">${before ? `<a href="${PERSON_PATH}${esc(query(base))}">Newest</a>` : ''}${
    events.next ? `<a href="${PERSON_PATH}${esc(query({ ...base, before: formatEventKey(events.next) }))}" rel="next">Older →</a>` : ''
  }</div>`;
  out += `<h2>Journey runs</h2>`;
  out += table(
    ['journey', 'status', 'step', 'entered', 'converted', 'ended', 'messages'],
    view.runs.map((r) => [
      callerText(r.journey),
      pill(r.status),
      String(r.step),
      when(r.enteredAt),
      r.convertedAt === null ? '' : when(r.convertedAt),
      r.endedAt === null ? '' : when(r.endedAt),
      r.messages
        .map(
          (m) =>
            `step ${m.step}: ${esc(m.channel)} ${callerText(m.template)} ${m.address === null ? '' : mono(m.address)} ${pill(m.status)}${m.reason ? ` ${callerText(m.reason)}` : ''}`,
        )
        .join('<br>'),
    ]),
    'No journey run.',
  );
  out += `<p class="note">Addresses, joined IDs and journey runs: at most ${PERSON_LIST_LIMIT} each, newest first.</p>`;
  return out;
}

/**
 * The person's actions, for an admin (a read-only operator changes nothing). Each form posts
 * with the CSRF token; forget asks for the userId typed again.
 */
function actions(ctx: Koa.Context, pathValue: string, userId: string): string {
  const operator = (ctx.state as ConsoleState).operator;
  if (operator?.role !== 'admin') return '';
  const hidden = `<input type="hidden" name="env" value="${esc(pathValue)}"><input type="hidden" name="user" value="${esc(userId)}">${csrfField(ctx)}`;
  const form = (action: string, label: string, extra = '') =>
    `<form method="post" action="${PERSON_ACTIONS_PATH}${action}">${hidden}${extra}<button type="submit">${esc(label)}</button></form>`;
  return `<div class="actions" aria-label="actions">${[
    form('export', 'Export (download)'),
    form('suppress', 'Suppress'),
    form('unsuppress', 'Unsuppress'),
    form(
      'forget',
      'Forget',
      `<input name="confirm" placeholder="type the userId to forget" size="22" aria-label="confirm forget"><label><input type="checkbox" name="suppress" value="1"> and suppress</label>`,
    ),
  ].join('')}</div>`;
}
