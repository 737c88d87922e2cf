// Operators' login to the dashboard (docs/operations.md, "Operators"). Once an operator exists,
// every page of the dashboard (bull-board, the live view) needs a session: POST /login with name
// and password sets an HttpOnly, SameSite=Strict cookie (Secure unless the request is plain HTTP
// to a loopback address); every change (any method but GET and HEAD) needs the session's CSRF
// token as well, in the X-CSRF-Token header or a form's `_csrf` field; a read-only operator
// changes nothing (403). Logins are limited per address and per name, counted in Redis so that
// every dashboard process shares the counts (login-limit.ts; without Redis a login is refused,
// 503). With no
// operator the dashboard is what it was without them: DASHBOARD_PASSWORD's basic auth when set,
// else loopback, read-only, personal data hidden (gateway/dashboard.ts).
import type { IncomingMessage } from 'node:http';
import type Koa from 'koa';
import { readBodyText } from '../read-body.ts';
import type { Db } from '../../platform/db.ts';
import { isLoopback } from '../../platform/loopback.ts';
import { sameOrigin } from '../live/access.ts';
import { ICON_LINKS } from '../live/favicon.ts';
import { esc } from '../live/html.ts';
import type { Config } from '../../platform/config.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Redis } from '../../platform/redis.ts';
import { createLoginLimit, LoginLimitUnavailable, type LoginLimit, type LoginLimits } from './login-limit.ts';
import { anyOperator, csrfMatches, csrfTokenOf, logIn, logOut, operatorOfSession, SESSION_MS, type SignedIn } from './operators.ts';

/** What a request carries once it passed the gate: `ctx.state.operator` and, with a session, `ctx.state.csrfToken`. */
export interface ConsoleState {
  operator?: SignedIn;
  /** The session's CSRF token (absent for a bearer token). */
  csrfToken?: string;
  /** A form's body, read to find its `_csrf` field (gateway/live/pages.ts reads it from here). */
  form?: string;
}

/** The cookie over HTTPS (or anything but loopback): the __Host- prefix binds it to this host and path /. */
const SECURE_COOKIE = '__Host-intake_session';
/** The cookie over plain HTTP to a loopback address, where a Secure cookie would not be sent back. */
const LOOPBACK_COOKIE = 'intake_session';

const FORM_LIMIT = 16_384;

/**
 * Whether a Secure cookie is needed: anything but plain HTTP to a loopback address. A TLS proxy
 * on the same host reaches the dashboard on loopback: its `X-Forwarded-Proto: https` asks for
 * Secure too (which can only make the cookie stricter, so the header need not be trusted).
 */
function secureCookie(ctx: Koa.Context): boolean {
  const local = ctx.req.socket.localAddress ?? '';
  const encrypted = Boolean((ctx.req.socket as { encrypted?: boolean }).encrypted);
  return encrypted || !isLoopback(local) || ctx.get('x-forwarded-proto').trim().toLowerCase() === 'https';
}

function setCookie(ctx: Koa.Context, value: string, maxAgeSeconds: number): void {
  const secure = secureCookie(ctx);
  const attributes = [`Path=/`, `HttpOnly`, `SameSite=Strict`, `Max-Age=${maxAgeSeconds}`, ...(secure ? ['Secure'] : [])];
  ctx.append('Set-Cookie', `${secure ? SECURE_COOKIE : LOOPBACK_COOKIE}=${value}; ${attributes.join('; ')}`);
}

/** The session id the request's cookie carries, or null. */
export function sessionIdOf(ctx: Koa.Context): string | null {
  const header = ctx.get('cookie');
  if (!header) return null;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    const name = part.slice(0, eq).trim();
    if (name === SECURE_COOKIE || name === LOOPBACK_COOKIE) return part.slice(eq + 1).trim();
  }
  return null;
}

const reads = (method: string) => method === 'GET' || method === 'HEAD';

/** A browser's request from another origin (a form of another site); a request with neither header is a script's. */
function crossSite(ctx: Koa.Context): boolean {
  const origin = ctx.get('origin') || undefined;
  const site = ctx.get('sec-fetch-site') || undefined;
  if (origin === undefined && site === undefined) return false;
  return !sameOrigin({ origin, 'sec-fetch-site': site, host: ctx.get('host') });
}

/**
 * A form's or a small JSON body's text, up to `limit` bytes: the gateway's reader (413 past the
 * limit, 400 for bytes that are not UTF-8, never replaced), whose status Koa answers with.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return readBodyText(req, limit, null);
}

/** A request's fields: a form, or a JSON object of strings. */
async function fields(ctx: Koa.Context): Promise<URLSearchParams> {
  const text = await readBody(ctx.req, FORM_LIMIT);
  if (ctx.is('application/json')) {
    try {
      const parsed = JSON.parse(text) as Record<string, unknown>;
      return new URLSearchParams(Object.entries(parsed).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : [])));
    } catch {
      return new URLSearchParams();
    }
  }
  return new URLSearchParams(text);
}

/** A script's request (JSON sent, or HTML not asked for) gets JSON; a browser's form gets pages and redirects. */
const wantsJson = (ctx: Koa.Context) => ctx.is('application/json') === 'application/json' || !/\btext\/html\b/.test(ctx.get('accept'));

/** Where a login goes next: a path of this dashboard only (never `//host`). */
function nextPath(value: string | null | undefined): string {
  return value && /^\/(?!\/)[^\\\s]*$/.test(value) ? value : '/';
}

function loginPage(options: { message?: string; next: string }): string {
  const message = options.message ? `<p class="error" role="alert">${esc(options.message)}</p>` : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>intake · log in</title>${ICON_LINKS}<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330;display:flex;justify-content:center;padding-top:12vh}
form{background:#fff;padding:24px 28px;box-shadow:0 1px 3px #0002;border-radius:6px;display:flex;flex-direction:column;gap:10px;min-width:280px}
h1{font-size:18px;margin:0 0 6px}label{display:flex;flex-direction:column;gap:4px;font-size:13px;color:#55607a}
input{font:inherit;padding:6px 8px;border:1px solid #c3c9d4;border-radius:4px}button{font:inherit;padding:6px;border-radius:4px;border:1px solid #2f6fde;background:#2f6fde;color:#fff;cursor:pointer}
.error{color:#a1231c;background:#fde2e1;padding:6px 8px;border-radius:4px;margin:0}</style></head>
<body><form method="post" action="/login"><h1>intake · log in</h1>${message}
<label>Name<input name="name" autocomplete="username" required autofocus></label>
<label>Password<input name="password" type="password" autocomplete="current-password" required></label>
<input type="hidden" name="next" value="${esc(options.next)}"><button type="submit">Log in</button></form></body></html>`;
}

export interface ConsoleAuth {
  /** GET and POST /login, POST /logout: before the gate. */
  routes: Koa.Middleware;
  /** Operators' sessions when any operator exists, else `otherwise` (basic auth or nothing). */
  gate(otherwise: Koa.Middleware | null): Koa.Middleware;
}

export function consoleAuth(deps: {
  db: Db;
  /** The dashboard's connection (fail-fast), on which failed logins are counted. */
  redis: Redis;
  config: Pick<Config, 'queuePrefix' | 'redisClusterNodes'>;
  log: Logger;
  limits?: Partial<LoginLimits>;
}): ConsoleAuth {
  const { db, log } = deps;
  const limit: LoginLimit = createLoginLimit({ redis: deps.redis, config: deps.config }, deps.limits);

  async function login(ctx: Koa.Context) {
    if (reads(ctx.method)) {
      ctx.type = 'html';
      ctx.set('Cache-Control', 'no-store');
      ctx.body = loginPage({ next: nextPath(typeof ctx.query.next === 'string' ? ctx.query.next : null) });
      return;
    }
    if (ctx.method !== 'POST') return methodNotAllowed(ctx, 'GET, POST');
    // A login form of another site would sign the browser in to an account of the attacker's.
    if (crossSite(ctx)) return refuse(ctx, 403, 'Forbidden: not sent from the dashboard');
    const form = await fields(ctx);
    const name = (form.get('name') ?? '').trim();
    const password = form.get('password') ?? '';
    const next = nextPath(form.get('next'));
    const address = ctx.req.socket.remoteAddress ?? 'unknown';
    let wait: number;
    try {
      wait = await limit.attempt(address, name);
    } catch (err) {
      if (!(err instanceof LoginLimitUnavailable)) throw err;
      // Fail closed: a login whose failures cannot be counted is not tried (login-limit.ts).
      log.warn({ err: err.message }, 'login refused: failed logins cannot be counted');
      ctx.set('Retry-After', '5');
      return loginFailed(ctx, 503, 'Logins are unavailable (the dashboard cannot reach Redis): try again later', next);
    }
    if (wait > 0) {
      ctx.set('Retry-After', String(Math.ceil(wait / 1000)));
      return loginFailed(ctx, 429, 'Too many failed logins: try again later', next);
    }
    const session = name && password ? await logIn(db, name, password) : null;
    // The attempt was counted as a failure already; a right password takes it back.
    if (!session) return loginFailed(ctx, 401, 'Wrong name or password', next);
    await limit.succeeded(address, name).catch((err: Error) => log.warn({ err: err.message }, 'failed logins of a name not cleared'));
    setCookie(ctx, session.sessionId, Math.floor(SESSION_MS / 1000));
    ctx.set('Cache-Control', 'no-store');
    const csrfToken = csrfTokenOf(session.sessionId);
    if (wantsJson(ctx)) {
      ctx.body = { name: session.operator.name, role: session.operator.role, csrfToken, expiresAt: session.expiresAt.getTime() };
      return;
    }
    ctx.status = 303;
    ctx.redirect(next);
  }

  function loginFailed(ctx: Koa.Context, status: number, message: string, next: string) {
    ctx.status = status;
    ctx.set('Cache-Control', 'no-store');
    if (wantsJson(ctx)) ctx.body = { error: message };
    else {
      ctx.type = 'html';
      ctx.body = loginPage({ message, next });
    }
  }

  async function logout(ctx: Koa.Context) {
    if (ctx.method !== 'POST') return methodNotAllowed(ctx, 'POST');
    const sessionId = sessionIdOf(ctx);
    if (!sessionId || !(await operatorOfSession(db, sessionId))) return unauthorized(ctx);
    const form = ctx.is('application/x-www-form-urlencoded') ? await fields(ctx) : null;
    const given = ctx.get('x-csrf-token') || form?.get('_csrf') || '';
    if (!csrfMatches(sessionId, given)) return refuse(ctx, 403, 'Forbidden: missing or wrong CSRF token');
    await logOut(db, sessionId);
    setCookie(ctx, '', 0);
    if (wantsJson(ctx)) {
      ctx.body = { loggedOut: true };
      return;
    }
    ctx.status = 303;
    ctx.redirect('/login');
  }

  return {
    routes: async function consoleRoutes(ctx, next) {
      if (ctx.path === '/login') return login(ctx);
      if (ctx.path === '/logout') return logout(ctx);
      return next();
    },
    gate(otherwise) {
      return async function consoleGate(ctx, next) {
        if (!(await anyOperator(db))) return otherwise ? otherwise(ctx, next) : next();
        const signedIn = await sessionOf(db, ctx);
        if (!signedIn) {
          if (reads(ctx.method) && /\btext\/html\b/.test(ctx.get('accept'))) {
            ctx.status = 303;
            return ctx.redirect(`/login?next=${encodeURIComponent(ctx.originalUrl)}`);
          }
          return unauthorized(ctx);
        }
        const state = ctx.state as ConsoleState;
        state.operator = signedIn.operator;
        state.csrfToken = csrfTokenOf(signedIn.sessionId);
        if (!reads(ctx.method)) {
          if (ctx.is('application/x-www-form-urlencoded')) state.form = await readBody(ctx.req, FORM_LIMIT);
          const given = ctx.get('x-csrf-token') || (state.form === undefined ? '' : (new URLSearchParams(state.form).get('_csrf') ?? ''));
          if (!csrfMatches(signedIn.sessionId, given)) return refuse(ctx, 403, 'Forbidden: missing or wrong CSRF token');
          if (signedIn.operator.role !== 'admin') return refuse(ctx, 403, 'Forbidden: a read-only operator changes nothing');
        }
        return next();
      };
    },
  };
}

/** The live session of the request's cookie, with its id (for its CSRF token), or null. */
export async function sessionOf(db: Db, ctx: Koa.Context): Promise<{ sessionId: string; operator: SignedIn } | null> {
  const sessionId = sessionIdOf(ctx);
  if (!sessionId) return null;
  const operator = await operatorOfSession(db, sessionId);
  return operator ? { sessionId, operator } : null;
}

export function unauthorized(ctx: Koa.Context): void {
  ctx.status = 401;
  ctx.set('WWW-Authenticate', 'Bearer realm="intake"');
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { error: 'Unauthorized' };
}

export function refuse(ctx: Koa.Context, status: number, error: string): void {
  ctx.status = status;
  ctx.set('Cache-Control', 'no-store');
  ctx.body = { error };
}

function methodNotAllowed(ctx: Koa.Context, allow: string): void {
  ctx.set('Allow', allow);
  refuse(ctx, 405, 'Method Not Allowed');
}

/**
 * The fields of a form posted to a console action, and the admin who posted it (the gate has checked its session and CSRF
 * token, and refused a read-only operator). Null once answered: 403 when no admin is signed in
 * (without operators nobody acts), 415 when the body is not the page's form.
 */
export function adminForm(ctx: Koa.Context, refusals: { forbidden: string; notForm: string }): { fields: URLSearchParams; operator: SignedIn } | null {
  const { operator, form } = ctx.state as ConsoleState;
  if (operator?.role !== 'admin') {
    ctx.status = 403;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { error: refusals.forbidden };
    return null;
  }
  if (form === undefined) {
    ctx.status = 415;
    ctx.body = { error: refusals.notForm };
    return null;
  }
  return { fields: new URLSearchParams(form), operator };
}
