// The console's keys page (/console/keys): an organization's environments and their API keys by
// suffix, with status and creation time; an admin creates a key (shown once, with a copy button)
// and revokes one after a confirmation page. Server-rendered like the live view: forms post with
// the session's CSRF token and the pages need no script but the copy button's file. Key creation
// and revocation are the admin API's and the operator command's own (key-actions.ts).
import type Koa from 'koa';
import type { Db } from '../../platform/db.ts';
import { listKeys } from '../../operations/keys.ts';
import { listEnvironments } from '../../operations/environments.ts';
import { findEnvironment, findLiveEnvironment, MissingError, OperatorError, type OperatorDeps } from '../../operations/operator.ts';
import { esc, mono, page, pill, table, when } from '../live/html.ts';
import type { ConsoleState } from './auth.ts';
import { createKeyAudited, revokeKeyAudited } from './key-actions.ts';
import { COPY_SCRIPT_PATH, KEYS_PATH } from './console-paths.ts';

const text = (value: unknown) => (typeof value === 'string' && value.trim() ? value.trim() : undefined);

export function keysPages(deps: { db: Db; operator: OperatorDeps }): Koa.Middleware {
  const { db } = deps;

  const admin = (ctx: Koa.Context) => (ctx.state as ConsoleState).operator?.role === 'admin';
  const csrfField = (ctx: Koa.Context) => `<input type="hidden" name="_csrf" value="${esc((ctx.state as ConsoleState).csrfToken ?? '')}">`;
  const hidden = (fields: Record<string, string>) =>
    Object.entries(fields)
      .map(([k, v]) => `<input type="hidden" name="${esc(k)}" value="${esc(v)}">`)
      .join('');

  async function list(ctx: Koa.Context) {
    const orgs = await db.organization.findMany({ orderBy: { slug: 'asc' }, select: { slug: true } });
    const slug = text(ctx.query.org) ?? orgs[0]?.slug;
    const options = orgs.map((o) => `<option value="${esc(o.slug)}"${o.slug === slug ? ' selected' : ''}>${esc(o.slug)}</option>`).join('');
    const chooser = `<form class="filter" method="get" action="${KEYS_PATH}"><label>Organization <select name="org">${options}</select></label><button type="submit">Show</button></form>`;
    const revoked = text(ctx.query.revoked);
    const flash = revoked ? `<div class="flash">Key ${mono(revoked)} is revoked: every gateway answers 401 to it.</div>` : '';
    if (!slug) {
      ctx.body = page({ title: 'Keys', path: KEYS_PATH, body: `<p class="note">No organization yet (intake org create).</p>` });
      return;
    }
    const environments = await listEnvironments(deps.operator, slug).catch((err) => {
      if (err instanceof MissingError) return null;
      throw err;
    });
    if (!environments) {
      ctx.status = 404;
      ctx.body = page({ title: 'Keys', path: KEYS_PATH, body: `${chooser}<p class="note">No organization ${esc(slug)}.</p>` });
      return;
    }
    const sections: string[] = [];
    for (const e of environments) {
      const { env } = await findEnvironment(db, slug, e.pathValue);
      const keys = await listKeys(deps.operator, env);
      const rows = keys.map((k) => {
        const revoke =
          admin(ctx) && k.status === 'active'
            ? `<a href="${esc(`${KEYS_PATH}/revoke?${new URLSearchParams({ org: slug, env: e.pathValue, suffix: k.suffix })}`)}">Revoke…</a>`
            : '';
        return [mono(k.suffix), pill(k.status), when(k.createdAt), revoke];
      });
      const create =
        admin(ctx) && !e.removed
          ? `<form method="post" action="${KEYS_PATH}/create">${hidden({ org: slug, env: e.pathValue })}${csrfField(ctx)}<button type="submit">Create a key</button></form>`
          : '';
      const title = `${esc(e.pathValue)}${e.production ? ' (Production)' : ` (X-Service-Environment: ${esc(e.key)})`}${e.removed ? ' (removed)' : ''}`;
      sections.push(`<h2>${title}</h2>${table(['suffix', 'status', 'created (UTC)', ''], rows, 'No key.')}${create}`);
    }
    const note = admin(ctx) ? '' : `<p class="note">Creating and revoking keys needs an admin operator's login.</p>`;
    ctx.body = page({ title: 'Keys', path: KEYS_PATH, body: `${flash}${chooser}${sections.join('')}${note}` });
  }

  /** The POSTed form (the operators' gate read it for its CSRF token); null when the caller may not change anything. */
  function formOf(ctx: Koa.Context): URLSearchParams | null {
    const state = ctx.state as ConsoleState;
    if (!admin(ctx) || state.form === undefined) {
      ctx.status = 403;
      ctx.body = { error: 'Forbidden: creating and revoking keys needs an admin operator' };
      return null;
    }
    return new URLSearchParams(state.form);
  }

  async function create(ctx: Koa.Context) {
    const form = formOf(ctx);
    if (!form) return;
    const org = form.get('org') ?? '';
    const { env } = await findLiveEnvironment(db, org, form.get('env') ?? '');
    const created = await createKeyAudited(deps, (ctx.state as ConsoleState).operator!.name, org, env);
    ctx.status = 201;
    ctx.set('Cache-Control', 'no-store');
    const body = `<p>A new key of <b>${esc(env.pathValue)}</b>. It is shown <b>only now</b>: copy it to where it is used.</p>
<p><input id="new-key" class="mono" size="50" readonly value="${esc(created.key)}"> <button type="button" data-copy="new-key">Copy</button></p>
<p class="note">Listed from now on by its suffix ${mono(created.suffix)}. A key may take a moment to work on a gateway that cached its absence.</p>
<p><a href="${esc(`${KEYS_PATH}?${new URLSearchParams({ org })}`)}">Back to the keys</a></p><script src="${COPY_SCRIPT_PATH}"></script>`;
    ctx.body = page({ title: 'New key', path: KEYS_PATH, body });
  }

  async function confirmRevoke(ctx: Koa.Context) {
    const org = text(ctx.query.org) ?? '';
    const suffix = text(ctx.query.suffix) ?? '';
    const { env } = await findEnvironment(db, org, text(ctx.query.env) ?? '');
    const form = admin(ctx)
      ? `<form method="post" action="${KEYS_PATH}/revoke">${hidden({ org, env: env.pathValue, suffix })}${csrfField(ctx)}<button type="submit">Revoke key ${esc(suffix)}</button></form>`
      : `<p class="note">Revoking a key needs an admin operator's login.</p>`;
    const body = `<p>Revoke the key ending in ${mono(suffix)} of <b>${esc(env.pathValue)}</b>? Every gateway answers 401 to it from then on; this cannot be undone.</p>${form}
<p><a href="${esc(`${KEYS_PATH}?${new URLSearchParams({ org })}`)}">Cancel</a></p>`;
    ctx.body = page({ title: 'Revoke a key', path: KEYS_PATH, body });
  }

  async function revoke(ctx: Koa.Context) {
    const form = formOf(ctx);
    if (!form) return;
    const org = form.get('org') ?? '';
    const suffix = form.get('suffix') ?? '';
    const { env } = await findEnvironment(db, org, form.get('env') ?? '');
    await revokeKeyAudited(deps, (ctx.state as ConsoleState).operator!.name, org, env, suffix);
    ctx.status = 303;
    ctx.redirect(`${KEYS_PATH}?${new URLSearchParams({ org, revoked: suffix })}`);
  }

  const routes: Record<string, { method: string; handle: (ctx: Koa.Context) => Promise<void> }> = {
    [KEYS_PATH]: { method: 'GET', handle: list },
    [`${KEYS_PATH}/create`]: { method: 'POST', handle: create },
    [`${KEYS_PATH}/revoke`]: { method: 'GET', handle: confirmRevoke },
  };

  return async function keysPage(ctx, next) {
    if (ctx.path === `${KEYS_PATH}/revoke` && ctx.method === 'POST') return answer(ctx, revoke);
    const route = routes[ctx.path];
    if (!route) return next();
    if (ctx.method !== route.method && !(route.method === 'GET' && ctx.method === 'HEAD')) {
      ctx.status = 405;
      ctx.set('Allow', route.method === 'GET' && ctx.path.endsWith('/revoke') ? 'GET, POST' : route.method);
      return;
    }
    ctx.set('Cache-Control', 'no-store');
    ctx.type = 'html';
    return answer(ctx, route.handle);
  };
}

/** Runs a page; an operator error (no such environment, a removed one) is a page saying so. */
async function answer(ctx: Koa.Context, handle: (ctx: Koa.Context) => Promise<void>) {
  try {
    await handle(ctx);
  } catch (err) {
    if (!(err instanceof OperatorError)) throw err;
    ctx.status = err instanceof MissingError ? 404 : 409;
    ctx.type = 'html';
    ctx.body = page({ title: 'Keys', path: KEYS_PATH, body: `<p class="flash">${esc(err.message)}</p><p><a href="${KEYS_PATH}">Back to the keys</a></p>` });
  }
}
