// The person page's actions (gateway/console/pages/person.ts): export, suppress, unsuppress and
// forget, posted by an admin's forms with the session's CSRF token (the operators' gate checks
// both before this runs; with no operator nothing is changed here either). Each one is the admin
// API's privacy request (privacy-requests.ts: the same object, so the same operations, the same
// audit naming the operator and the same export files); the browser is sent to the request's
// page, which shows its id and status and reloads itself until it is done. Forget asks for the
// userId typed again: a mismatch submits nothing and says so. An export's document is downloaded
// from the request's page, by admins only, as from the admin API.
import { createReadStream } from 'node:fs';
import type Koa from 'koa';
import type { Db } from '../../platform/db.ts';
import { MissingError, OperatorError } from '../../operations/operator.ts';
import { environmentByPath } from '../live/data.ts';
import { callerText, esc, mono, pill, when } from '../live/html.ts';
import { adminForm, type ConsoleState } from './auth.ts';
import { PERSON_ACTIONS_PATH, PRIVACY_REQUESTS_PATH } from './console-paths.ts';
import { consolePage, fields, query } from './pages/view.ts';
import { exportDocument, PRIVACY_ACTIONS, type PrivacyAction, type PrivacyRequests } from './privacy-requests.ts';

const PERSON_PATH = '/console/person';
/** How often a request's page reloads while the request is pending or running. */
const RELOAD_SECONDS = 1;

const REQUEST_PAGE = new RegExp(`^${PRIVACY_REQUESTS_PATH}/([^/]+)(/export)?$`);

export function personActions(deps: { db: Db; requests: PrivacyRequests }): Koa.Middleware {
  const { db, requests } = deps;

  function html(ctx: Koa.Context, status: number, title: string, body: string, refreshSeconds?: number) {
    ctx.status = status;
    ctx.type = 'html';
    ctx.set('Cache-Control', 'no-store');
    ctx.body = consolePage({ title, path: PERSON_PATH, body, refreshSeconds });
  }

  const personLink = (env: string, user: string, label = 'Back to the person') =>
    `<p><a href="${PERSON_PATH}${esc(query({ env, user }))}">${esc(label)}</a></p>`;

  async function act(ctx: Koa.Context, action: string) {
    if (ctx.method !== 'POST') {
      ctx.status = 405;
      ctx.set('Allow', 'POST');
      return;
    }
    if (!(PRIVACY_ACTIONS as readonly string[]).includes(action)) {
      ctx.status = 404;
      return;
    }
    const posted = adminForm(ctx, {
      forbidden: "Forbidden: a person's actions need an admin operator",
      notForm: 'send the person page’s form (application/x-www-form-urlencoded); scripts use the admin API',
    });
    if (!posted) return;
    const { fields: form, operator } = posted;
    const pathValue = form.get('env') ?? '';
    const userId = form.get('user') ?? '';
    const env = pathValue ? await environmentByPath(db, pathValue) : null;
    if (!env) return html(ctx, 404, 'Person', `<p class="flash">No environment with the path value ${callerText(pathValue)}: nothing was done.</p>`);
    if (!userId.trim()) return html(ctx, 400, 'Person', `<p class="flash">No userId: nothing was done.</p>`);
    if (action === 'forget' && form.get('confirm') !== userId)
      return html(
        ctx,
        422,
        'Forget a person',
        `<p class="flash">The confirmation does not match the userId ${mono(userId)}: nothing was forgotten. Type the userId exactly as shown to forget the person.</p>${personLink(env.pathValue, userId)}`,
      );
    const suppress = action === 'forget' && form.get('suppress') !== null;
    const request = await requests.submit(operator, env, action as PrivacyAction, userId, { suppress });
    ctx.status = 303;
    ctx.set('Cache-Control', 'no-store');
    ctx.redirect(`${PRIVACY_REQUESTS_PATH}/${request.id}${query({ env: env.pathValue, user: userId })}`);
  }

  async function show(ctx: Koa.Context, id: string) {
    const operator = (ctx.state as ConsoleState).operator;
    if (!operator) return html(ctx, 403, 'Privacy request', `<p class="note">A privacy request's page needs an operator's login.</p>`);
    const request = await requests.get(id);
    if (!request) return html(ctx, 404, 'Privacy request', `<p class="note">No privacy request ${callerText(id)}.</p>`);
    const done = request.status === 'succeeded' || request.status === 'failed';
    const back = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
    const env = back(ctx.query.env);
    const user = back(ctx.query.user);
    let body = fields([
      ['request', mono(request.id)],
      ['action', esc(request.action)],
      ['status', pill(request.status)],
      ['environment', mono(request.environment)],
      ['operator', callerText(request.operator)],
      ['person (keyed hash)', mono(request.userHash)],
      ['submitted', when(request.createdAt)],
      ['started', request.startedAt === null ? '' : when(request.startedAt)],
      ['finished', request.finishedAt === null ? '' : when(request.finishedAt)],
      ...(request.result ? ([['result', `<span class="mono">${callerText(JSON.stringify(request.result))}</span>`]] as [string, string][]) : []),
      // Runs: more than one when a run failed (retried) or its dashboard stopped under it (resumed by another).
      ...(request.attempts > 1 ? ([['runs', String(request.attempts)]] as [string, string][]) : []),
      ...(request.error === null ? [] : ([[done ? 'error' : 'last run’s error', callerText(request.error)]] as [string, string][])),
    ]);
    if (!done) body += `<p class="note">The request is ${esc(request.status)}: this page reloads until it is done (<a href="${esc(ctx.url)}">reload</a>).</p>`;
    if (request.action === 'export' && request.status === 'succeeded') {
      const until = typeof request.result?.availableUntil === 'number' ? ` until ${when(request.result.availableUntil)} UTC` : '';
      body +=
        operator.role === 'admin'
          ? `<p><a href="${PRIVACY_REQUESTS_PATH}/${esc(request.id)}/export" download>Download the export (JSON)</a> <span class="note">kept${until}</span></p>`
          : `<p class="note">The export's document is personal data: an admin downloads it.</p>`;
    }
    if (env && user) body += personLink(env, user);
    html(ctx, 200, `Privacy request: ${request.action}`, body, done ? undefined : RELOAD_SECONDS);
  }

  async function download(ctx: Koa.Context, id: string) {
    // The document is the person's data: admins only, as the admin API's download.
    if ((ctx.state as ConsoleState).operator?.role !== 'admin') {
      ctx.status = 403;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = { error: 'Forbidden: a read-only operator sees no personal data' };
      return;
    }
    let file: string;
    try {
      file = await exportDocument(requests, id);
    } catch (err) {
      if (!(err instanceof OperatorError)) throw err;
      return html(ctx, err instanceof MissingError ? 404 : 409, 'Export', `<p class="flash">${esc(err.message)}</p>`);
    }
    ctx.type = 'application/json';
    ctx.set('Cache-Control', 'no-store');
    ctx.set('Content-Disposition', `attachment; filename="export-${id}.json"`);
    ctx.body = createReadStream(file);
  }

  return async function personActions(ctx, next) {
    if (ctx.path.startsWith(PERSON_ACTIONS_PATH)) return act(ctx, ctx.path.slice(PERSON_ACTIONS_PATH.length));
    const m = REQUEST_PAGE.exec(ctx.path);
    if (!m) return next();
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
      ctx.status = 405;
      ctx.set('Allow', 'GET');
      return;
    }
    return m[2] ? download(ctx, m[1]) : show(ctx, m[1]);
  };
}
