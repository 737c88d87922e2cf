// The admin API under the dashboard's port (docs/admin-openapi.yaml): keys and environments of
// each organization, and privacy requests. Every route needs an operator: `Authorization: Bearer
// <token>` (intake operator token) or a console session, whose changes carry its CSRF token in
// X-CSRF-Token. A read-only operator reads; a change answers it 403. Without either, 401, on
// every path under /admin/api/ (known or not). Each operation is the one `intake` runs
// (operations/keys.ts, environments.ts, people.ts: the revocation's cache drop on every gateway
// included), and each change is audited with the operator's name (console_audit).
import { createReadStream } from 'node:fs';
import type Koa from 'koa';
import type { Db } from '../../platform/db.ts';
import type { Logger } from '../../platform/logger.ts';
import { listKeys } from '../../operations/keys.ts';
import { createKeyAudited, revokeKeyAudited } from './key-actions.ts';
import { listEnvironments } from '../../operations/environments.ts';
import { findEnvironment, findLiveEnvironment, MissingError, OperatorError, type OperatorDeps } from '../../operations/operator.ts';
import { refuse, sessionOf, unauthorized, type ConsoleState } from './auth.ts';
import { auditChange, csrfMatches, csrfTokenOf, listConsoleAudit, operatorOfToken, type SignedIn } from './operators.ts';
import { createPrivacyRequests, exportDocument, PRIVACY_ACTIONS, type PrivacyAction, type PrivacyRequests } from './privacy-requests.ts';

export const ADMIN_API_PREFIX = '/admin/api/';
const V1 = '/admin/api/v1';
const BODY_LIMIT = 16_384;

/** A request's operator, and how it authenticated. */
interface Caller {
  operator: SignedIn;
  /** The session's id when it came with the cookie (its changes need the CSRF token); null for a bearer token. */
  sessionId: string | null;
}

/** A route's work: reads its parameters from `params`, answers through ctx. */
type Handler = (ctx: Koa.Context, params: Record<string, string>, caller: Caller) => Promise<void>;

interface Route {
  method: 'GET' | 'POST';
  pattern: RegExp;
  /** Names of the pattern's groups, in order. */
  params: string[];
  /** Whether it changes something: admins only, CSRF for sessions. */
  change: boolean;
  handle: Handler;
  /** `GET /admin/api/v1/organizations/{org}/environments`, as docs/admin-openapi.yaml names it. */
  operation: string;
}

/** `/organizations/{org}/environments` → a pattern whose groups are the segments in braces. */
function route(method: Route['method'], template: string, change: boolean, handle: Handler): Route {
  const params: string[] = [];
  const source = template.replace(/\{(\w+)\}/g, (_, name: string) => {
    params.push(name);
    return '([^/]+)';
  });
  return { method, pattern: new RegExp(`^${V1}${source}$`), params, change, handle, operation: `${method} ${V1}${template}` };
}

class BadRequest extends Error {}

async function readJson(ctx: Koa.Context): Promise<Record<string, unknown>> {
  let text = '';
  ctx.req.setEncoding('utf8');
  for await (const chunk of ctx.req) {
    text += chunk;
    if (text.length > BODY_LIMIT) throw Object.assign(new Error('body too large'), { status: 413, expose: true });
  }
  if (!text.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new BadRequest('the body is not valid JSON');
  }
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new BadRequest('the body must be a JSON object');
  return parsed as Record<string, unknown>;
}

/**
 * The API's routes. `requests`: the privacy requests it shares with the console's person page
 * (their exports are kept by the object that ran them), closed by whoever made it; without it the
 * API makes its own and closes it.
 */
export function adminApi(deps: { db: Db; operator: OperatorDeps; log: Logger; requests?: PrivacyRequests }): {
  middleware: Koa.Middleware;
  /** Every route as `METHOD path-template` (docs/admin-openapi.yaml describes each). */
  operations: string[];
  close(): Promise<void>;
} {
  const { db, operator, log } = deps;
  const requests = deps.requests ?? createPrivacyRequests({ db, operator, log });

  /** The environment `{env}` (a path value; Production's is the organization's slug) of `{org}`. */
  const environment = (params: Record<string, string>, live = false) => (live ? findLiveEnvironment : findEnvironment)(db, params.org, params.env);

  const routes: Route[] = [
    route('GET', '/me', false, async (ctx, _params, caller) => {
      ctx.body = { name: caller.operator.name, role: caller.operator.role, ...(caller.sessionId ? { csrfToken: csrfTokenOf(caller.sessionId) } : {}) };
    }),
    route('GET', '/organizations', false, async (ctx) => {
      const orgs = await db.organization.findMany({ orderBy: { slug: 'asc' } });
      ctx.body = orgs.map((o) => ({ slug: o.slug, features: o.features, createdAt: o.createdAt.getTime() }));
    }),
    route('GET', '/organizations/{org}/environments', false, async (ctx, params) => {
      ctx.body = await listEnvironments(operator, params.org);
    }),
    route('GET', '/organizations/{org}/environments/{env}/keys', false, async (ctx, params) => {
      const { env } = await environment(params);
      ctx.body = await listKeys(operator, env);
    }),
    route('POST', '/organizations/{org}/environments/{env}/keys', true, async (ctx, params, caller) => {
      const { env } = await environment(params, true);
      ctx.status = 201;
      ctx.set('Cache-Control', 'no-store');
      ctx.body = await createKeyAudited(deps, caller.operator.name, params.org, env);
    }),
    route('POST', '/organizations/{org}/environments/{env}/keys/{suffix}/revoke', true, async (ctx, params, caller) => {
      const { env } = await environment(params);
      ctx.body = await revokeKeyAudited(deps, caller.operator.name, params.org, env, params.suffix);
    }),
    route('POST', '/organizations/{org}/environments/{env}/privacy-requests', true, async (ctx, params, caller) => {
      const body = await readJson(ctx);
      const action = body.action;
      if (typeof action !== 'string' || !(PRIVACY_ACTIONS as readonly string[]).includes(action))
        throw new BadRequest(`action must be one of ${PRIVACY_ACTIONS.join(', ')}`);
      if (typeof body.userId !== 'string' || !body.userId.trim()) throw new BadRequest('userId must be a non-empty string');
      if (body.suppress !== undefined && typeof body.suppress !== 'boolean') throw new BadRequest('suppress must be true or false');
      if (body.suppress !== undefined && action !== 'forget') throw new BadRequest('suppress goes with forget only');
      const { env } = await environment(params);
      const request = await requests.submit(caller.operator, env, action as PrivacyAction, body.userId, { suppress: body.suppress === true });
      ctx.status = 202;
      ctx.set('Location', `${V1}/privacy-requests/${request.id}`);
      ctx.body = request;
    }),
    route('GET', '/privacy-requests/{id}', false, async (ctx, params) => {
      const request = await requests.get(params.id);
      if (!request) throw new MissingError(`no privacy request ${params.id}`);
      ctx.body = request;
    }),
    route('GET', '/privacy-requests/{id}/export', false, async (ctx, params, caller) => {
      // The document is the person's data: admins only.
      if (caller.operator.role !== 'admin') return refuse(ctx, 403, 'Forbidden: a read-only operator sees no personal data');
      const file = await exportDocument(requests, params.id);
      ctx.type = 'application/json';
      ctx.set('Cache-Control', 'no-store');
      ctx.set('Content-Disposition', `attachment; filename="export-${params.id}.json"`);
      ctx.body = createReadStream(file);
    }),
    route('GET', '/audit', false, async (ctx) => {
      const limit = wholeQuery(ctx.query.limit, 1, 1000, 100, 'limit');
      const before = ctx.query.before === undefined ? undefined : wholeQuery(ctx.query.before, 1, Number.MAX_SAFE_INTEGER, 0, 'before');
      ctx.body = await listConsoleAudit(db, limit, before);
    }),
  ];

  async function authenticate(ctx: Koa.Context): Promise<Caller | null> {
    const authorization = ctx.get('authorization');
    if (authorization) {
      const bearer = /^Bearer +(\S+)$/i.exec(authorization.trim());
      const signedIn = bearer ? await operatorOfToken(db, bearer[1]) : null;
      return signedIn ? { operator: signedIn, sessionId: null } : null;
    }
    const session = await sessionOf(db, ctx);
    return session ? { operator: session.operator, sessionId: session.sessionId } : null;
  }

  const middleware: Koa.Middleware = async function adminApi(ctx, next) {
    if (!ctx.path.startsWith(ADMIN_API_PREFIX) && ctx.path !== '/admin/api') return next();
    ctx.set('Cache-Control', 'no-store');
    const caller = await authenticate(ctx);
    if (!caller) return unauthorized(ctx);
    (ctx.state as ConsoleState).operator = caller.operator;
    const matched = routes.map((r) => ({ r, m: r.pattern.exec(ctx.path) })).filter((x) => x.m !== null);
    if (!matched.length) return refuse(ctx, 404, 'Not Found');
    const found = matched.find((x) => x.r.method === ctx.method || (x.r.method === 'GET' && ctx.method === 'HEAD'));
    if (!found) {
      ctx.set('Allow', [...new Set(matched.map((x) => x.r.method))].join(', '));
      return refuse(ctx, 405, 'Method Not Allowed');
    }
    const { r, m } = found;
    if (r.change) {
      if (caller.sessionId && !csrfMatches(caller.sessionId, ctx.get('x-csrf-token'))) return refuse(ctx, 403, 'Forbidden: missing or wrong CSRF token');
      if (caller.operator.role !== 'admin') return refuse(ctx, 403, 'Forbidden: a read-only operator changes nothing');
    }
    try {
      const params = Object.fromEntries(r.params.map((name, i) => [name, decodePart(m![i + 1])]));
      await r.handle(ctx, params, caller);
    } catch (err) {
      if (err instanceof BadRequest) return refuse(ctx, 400, err.message);
      if (err instanceof MissingError) return refuse(ctx, 404, err.message);
      if (err instanceof OperatorError) return refuse(ctx, 409, err.message);
      throw err;
    }
  };
  return { middleware, operations: routes.map((r) => r.operation), close: async () => (deps.requests ? undefined : requests.close()) };
}

function wholeQuery(value: unknown, min: number, max: number, fallback: number, name: string): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || !/^\d{1,16}$/.test(value) || Number(value) < min || Number(value) > max)
    throw new BadRequest(`${name} must be a whole number from ${min} to ${max}`);
  return Number(value);
}

function decodePart(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    throw new BadRequest(`malformed path segment ${JSON.stringify(part)}`);
  }
}
