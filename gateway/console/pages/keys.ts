// The console's keys page (/console/keys, /console/keys?org=<slug>): the organizations, then one
// organization's environments with their keys by suffix, status and creation time
// (environments/key-list.ts). Neither a key nor its hash is read. Creating and revoking keys are
// the admin API's (gateway/console/admin-api.ts): forms posting with the CSRF token to
// KEY_ACTIONS_PATH/<action> call it once merged; until then they answer 501.
import type Koa from 'koa';
import { listOrganizations, organizationKeys, ORGANIZATIONS_LISTED } from '../../../environments/key-list.ts';
import { callerText, esc, mono, pill, table, when } from '../../live/html.ts';
import type { ConsoleState } from '../auth.ts';
import { EVENTS_PATH } from './events.ts';
import type { PagesDeps } from './index.ts';
import { consolePage, csrfField, fields, query } from './view.ts';

export const KEYS_PATH = '/console/keys';
export const KEY_ACTIONS_PATH = '/console/keys/';
export const KEY_ACTIONS = ['create', 'revoke'] as const;

export async function keysPage(deps: PagesDeps, ctx: Koa.Context): Promise<void> {
  const slug = typeof ctx.query.org === 'string' && ctx.query.org.trim() ? ctx.query.org.trim() : undefined;
  const form = `<form class="filter" method="get" action="${KEYS_PATH}"><label>organization <input name="org" value="${esc(slug ?? '')}" size="24"></label><button type="submit">Show</button></form>`;
  let body = form;
  if (slug === undefined) {
    const orgs = await listOrganizations(deps.db);
    body += table(
      ['organization', 'environments', 'created'],
      orgs.map((o) => [`<a href="${KEYS_PATH}${esc(query({ org: o.slug }))}">${mono(o.slug)}</a>`, String(o.environments), when(o.createdAt)]),
      'No organization yet: intake org create <slug>.',
    );
    body += `<p class="note">The newest ${ORGANIZATIONS_LISTED} organizations; any other by its slug.</p>`;
  } else {
    const org = await organizationKeys(deps.db, slug);
    if (!org) {
      ctx.status = 404;
      body += `<p class="note">No organization ${callerText(slug)}.</p>`;
    } else {
      body += fields([
        ['organization', mono(org.slug)],
        ['created', when(org.createdAt)],
      ]);
      const admin = (ctx.state as ConsoleState).operator?.role === 'admin';
      for (const env of org.environments) {
        const title = `${env.isProduction ? 'Production' : 'Environment'} ${env.environmentKey}`;
        body += `<h2>${esc(title)} · <a href="${EVENTS_PATH}${esc(query({ env: env.pathValue }))}">${mono(env.pathValue)}</a>${env.removedAt === null ? '' : ` <span class="note">(removed ${when(env.removedAt)})</span>`}</h2>`;
        body += table(
          ['key', 'status', 'created', 'revoked', ...(admin ? [''] : [])],
          env.keys.map((k) => [
            mono(`…${k.suffix}`),
            pill(k.status),
            when(k.createdAt),
            k.revokedAt === null ? '' : when(k.revokedAt),
            ...(admin ? [k.status === 'active' ? keyAction(ctx, 'revoke', env.pathValue, org.slug, k.suffix) : ''] : []),
          ]),
          'No key.',
        );
        if (admin && env.removedAt === null) body += `<div class="actions">${keyAction(ctx, 'create', env.pathValue, org.slug)}</div>`;
      }
      body += `<p class="note">Keys are listed by their last characters; the key itself is shown once, when it is made, and only its SHA-256 is stored.</p>`;
    }
  }
  ctx.body = consolePage({ title: 'Keys and environments', path: KEYS_PATH, body });
}

function keyAction(ctx: Koa.Context, action: 'create' | 'revoke', pathValue: string, org: string, suffix?: string): string {
  const fieldsHtml = `<input type="hidden" name="org" value="${esc(org)}"><input type="hidden" name="env" value="${esc(pathValue)}">${
    suffix === undefined ? '' : `<input type="hidden" name="suffix" value="${esc(suffix)}">`
  }${csrfField(ctx)}`;
  return `<form method="post" action="${KEY_ACTIONS_PATH}${action}">${fieldsHtml}<button type="submit">${action === 'create' ? 'Create a key' : 'Revoke'}</button></form>`;
}

/**
 * POST /console/keys/<action>: where the admin API's key creation (the key shown once) and
 * revocation (the gateways told, then 401) are called after the merge; until then it changes
 * nothing and says so.
 */
export async function keyAction501(_deps: PagesDeps, ctx: Koa.Context, action: string): Promise<void> {
  if (ctx.method !== 'POST') {
    ctx.status = 405;
    ctx.set('Allow', 'POST');
    return;
  }
  if (!(KEY_ACTIONS as readonly string[]).includes(action)) {
    ctx.status = 404;
    return;
  }
  ctx.status = 501;
  ctx.body = { error: `key ${action} from the console is not connected yet: use intake key ${action}` };
}
