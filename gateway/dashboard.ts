// The queue dashboard (`intake dashboard`): bull-board over the product's queues on its own
// port and address, so it can be published (or not) separately from the ingest API. Closed by
// default (docs/operations.md, "Dashboard"): it listens on loopback, and without a password it
// hides job data and refuses any other address.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { Queue } from 'bullmq';
import Koa from 'koa';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Db } from '../platform/db.ts';
import { registerQueueDepth } from '../platform/queue-depth.ts';
import { isLoopback } from '../platform/loopback.ts';
import { healthz, metrics, readyz } from './handlers/health.ts';
import { ConfigError, type Config } from '../platform/config.ts';
import { drainable, listen } from '../platform/listen.ts';
import { answerInJson } from './client-error.ts';
import type { Logger } from '../platform/logger.ts';
import { allPartitions, closeQueues, EVENTS_QUEUE } from '../platform/queues.ts';
import { createDeadLetterQueue, createEventsQueues, createServiceEventsQueue } from '../events/jobs.ts';
import { createRedis } from '../platform/redis.ts';
import { BOARD_UI, boardPage, CSRF_SCRIPT, CSRF_SCRIPT_PATH, DASHBOARD_CSP } from './live/board-page.ts';
import { sessionBar } from './live/html.ts';
import { ICONS } from './live/favicon.ts';
import { livePages } from './live/pages.ts';
import { seesPersonalData } from './live/access.ts';
import { consoleAuth, type ConsoleAuth, type ConsoleState } from './console/auth.ts';
import { consolePages } from './console/pages/index.ts';
import type { LoginLimits } from './console/login-limit.ts';
import { anyClaimable } from './console/privacy-leases.ts';
import { COPY_SCRIPT, COPY_SCRIPT_PATH, KEYS_PATH, PERSON_ACTIONS_PATH, PRIVACY_REQUESTS_PATH } from './console/console-paths.ts';

export interface Dashboard {
  port: number;
  close(): Promise<void>;
}

type DashboardConfig = Pick<
  Config,
  | 'redisUrl'
  | 'redisClusterNodes'
  | 'queuePartitions'
  | 'queuePrefix'
  | 'jobAttempts'
  | 'jobBackoffMs'
  | 'dashboardHost'
  | 'dashboardPort'
  | 'dashboardUser'
  | 'dashboardPassword'
  | 'dashboardReadOnly'
  | 'shutdownTimeoutMs'
  | 'liveIdentifyCalls'
>;

/** Listen on config.dashboardPort (0 picks a free one); rejects when the port is taken. */
export async function startDashboard(deps: { config: Config; db: Db; log: Logger; loginLimits?: Partial<LoginLimits> }): Promise<Dashboard> {
  const { config, db, log } = deps;
  const refused = exposureProblem(config);
  if (refused) throw new ConfigError(refused);
  // The port is taken before anything else is opened, so a taken port (which `intake dev`
  // tolerates) leaves no Redis connection behind.
  // Node's Host check is made by answerInJson (below), which answers in JSON.
  const server = http.createServer({ requireHostHeader: false });
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  const port = await listen(server, config.dashboardPort, config.dashboardHost);

  // Fail-fast profile: while Redis is away a page load errors at once instead of hanging.
  const redis = createRedis(config, 'producer', log);
  // The same factories as the producers, so a job added from the dashboard gets the product's retry policy.
  // Each events job is one gateway batch (its name says how many events it carries); the dead-letter
  // queue holds one job per refused event, which an operator retries here (unless read-only).
  // Every partition of the events queue is listed: each is a queue of its own.
  const eventsQueues = createEventsQueues(config, redis);
  const deadLetterQueue = createDeadLetterQueue(config, redis);
  const queues = [...eventsQueues, deadLetterQueue, createServiceEventsQueue(config, redis)];
  for (const queue of queues) queue.on('error', (err) => log.warn({ err: err.message, queue: queue.name }, 'dashboard queue'));
  // Like every process: /healthz, /readyz and /metrics, open (no dashboard credentials).
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  // The events queue's partitions are counted as one queue, `events`, as every process reports it.
  registerQueueDepth(
    registry,
    { [EVENTS_QUEUE]: allPartitions(eventsQueues), ...Object.fromEntries(queues.slice(eventsQueues.length).map((queue) => [queue.name, queue])) },
    1000,
  );
  const probes = { readyz: readyz({ db, redis }), metrics: metrics(registry) };
  const live = livePages({ config, db, redis, eventsQueues, deadLetterQueue });
  const pages = consolePages({ config, db, redis, eventsQueues, deadLetterQueue });
  const operators = consoleAuth({ db, redis, config, log, limits: deps.loginLimits });
  const admin = lazyConsole(config, db, log);
  // Malformed HTTP, an unknown Expect, no Host: a JSON error as on the gateway, not Node's empty body.
  answerInJson(server, createDashboardApp({ config, queues, live, pages, probes, log, operators, admin: admin.api, keys: admin.pages }).callback());

  if (!config.dashboardPassword) {
    log.warn(
      { host: config.dashboardHost, port },
      'dashboard is unauthenticated (DASHBOARD_PASSWORD is not set): loopback only, read-only, job data hidden; anyone on this host can see the queues unless an operator exists (intake operator add), whose login every page then needs',
    );
  }
  log.info(
    { host: config.dashboardHost, port, queues: queues.map((q) => q.name), readOnly: config.dashboardReadOnly, auth: Boolean(config.dashboardPassword) },
    'dashboard listening',
  );

  return drainable(server, port, config.shutdownTimeoutMs, async () => {
    await admin.close();
    await closeQueues(queues, redis);
    log.info('dashboard stopped');
  });
}

/**
 * The admin API (gateway/console/admin-api.ts), the console's keys page (keys-page.ts) and the
 * person page's actions with their privacy requests' pages (person-actions.ts), loaded with the
 * operator commands' code on the first request to any of them: a dashboard nobody calls them on
 * starts as fast as without them (or on the first privacy request to resume). The API authenticates by itself (before the operators' gate);
 * the pages sit behind the gate. The API and the actions share one PrivacyRequests.
 */
function lazyConsole(config: Config, db: Db, log: Logger): { api: Koa.Middleware; pages: Koa.Middleware; close(): Promise<void> } {
  type Loaded = { api: Koa.Middleware; pages: Koa.Middleware; resume(): Promise<void>; close(): Promise<void> };
  let loaded: Promise<Loaded> | undefined;
  const load = async (): Promise<Loaded> => {
    const [{ adminApi }, { keysPages }, { personActions }, { createPrivacyRequests }, { loadQueueModules, openOperator }] = await Promise.all([
      import('./console/admin-api.ts'),
      import('./console/keys-page.ts'),
      import('./console/person-actions.ts'),
      import('./console/privacy-requests.ts'),
      import('../operations/operator.ts'),
    ]);
    // The operator commands' clients: their cache invalidations, queues and Redis, on the dashboard's database client.
    const operator = openOperator(config, db, await loadQueueModules());
    // One set of privacy requests for the API and the person page: an export is downloaded from the process that made it.
    const requests = createPrivacyRequests({ db, operator, log });
    const api = adminApi({ db, operator, log, requests });
    const keys = keysPages({ db, operator });
    const actions = personActions({ db, requests });
    return {
      api: api.middleware,
      pages: (ctx, next) => (ctx.path.startsWith(KEYS_PATH) ? keys(ctx, next) : actions(ctx, next)),
      resume: () => requests.resume(),
      async close() {
        await api.close();
        await requests.close();
        await operator.close(true);
      },
    };
  };
  // Privacy requests whose dashboard stopped under them (privacy-leases.ts): looked for at start
  // and every half lease, with one small query; the requests' code is loaded only when one is found.
  let looking: Promise<void> | undefined;
  const look = () =>
    (looking ??= (async () => {
      if (await anyClaimable(db)) await (await (loaded ??= load())).resume();
    })()
      .catch((err: Error) => log.warn({ err: err.message }, 'privacy requests not resumed'))
      .finally(() => (looking = undefined)));
  void look();
  const watch = setInterval(look, Math.floor(config.privacyRequestLeaseMs / 2)).unref();
  return {
    api: async (ctx, next) => {
      if (ctx.path !== '/admin/api' && !ctx.path.startsWith('/admin/api/')) return next();
      return (await (loaded ??= load())).api(ctx, next);
    },
    pages: async (ctx, next) => {
      if (!ctx.path.startsWith(KEYS_PATH) && !ctx.path.startsWith(PERSON_ACTIONS_PATH) && !ctx.path.startsWith(`${PRIVACY_REQUESTS_PATH}/`)) return next();
      return (await (loaded ??= load())).pages(ctx, next);
    },
    close: async () => {
      clearInterval(watch);
      await looking;
      if (loaded) await (await loaded).close();
    },
  };
}

/**
 * Why the dashboard must not start as configured, or null. Without a password anyone who reaches
 * the port sees it, so it stays on loopback; and it hides job data, so it must stay read-only:
 * editing or copying a job there would write the placeholder over the event it holds.
 */
export function exposureProblem(config: Pick<Config, 'dashboardHost' | 'dashboardPassword' | 'dashboardReadOnly'>): string | null {
  if (config.dashboardPassword) return null;
  if (!isLoopback(config.dashboardHost)) {
    return `DASHBOARD_HOST=${config.dashboardHost} is not a loopback address: set DASHBOARD_PASSWORD to listen there, or leave DASHBOARD_HOST at 127.0.0.1`;
  }
  if (!config.dashboardReadOnly) return 'DASHBOARD_READ_ONLY=false needs DASHBOARD_PASSWORD: without one the dashboard hides job data and stays read-only';
  return null;
}

export { isLoopback };

/** What the dashboard shows of a job's data and return value when no password guards it. */
export const HIDDEN_JOB_DATA = 'hidden: set DASHBOARD_PASSWORD to see job data';

/** healthz, readyz, metrics and the icon (open) → login and logout → the admin API (its own auth) → operators' sessions, or basic auth when no operator exists and a password is set → the console's pages (/console/…) → the live view (/live/…) → bull-board (UI at /, JSON API under /api). */
function createDashboardApp(deps: {
  config: DashboardConfig;
  queues: Queue[];
  /** The live view's pages (gateway/live/pages.ts), behind the same auth as bull-board. */
  live: Koa.Middleware;
  /** The console's pages (gateway/console/pages), behind the same auth. */
  pages: Koa.Middleware;
  /** Operators' login, sessions and CSRF tokens (gateway/console/auth.ts). */
  operators: ConsoleAuth;
  /** The admin API under /admin/api/ (gateway/console/admin-api.ts), with its own authentication. */
  admin: Koa.Middleware;
  /** The console's keys page (gateway/console/keys-page.ts), behind the same auth as the live view. */
  keys: Koa.Middleware;
  probes: { readyz: Koa.Middleware; metrics: Koa.Middleware };
  log: Logger;
}): Koa {
  const { config, queues, probes, log } = deps;
  /**
   * bull-board over the queues; `hidden`: queues, counts, job names and states still show, the
   * payloads (user IDs, properties) do not (bull-board runs each job it answers with, list and
   * single job, through these formatters).
   */
  const boardOf = (hidden: boolean) => {
    const board = new KoaAdapter();
    const adapters = queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: config.dashboardReadOnly }));
    if (hidden) {
      for (const adapter of adapters) {
        adapter.setFormatter('data', () => HIDDEN_JOB_DATA);
        adapter.setFormatter('returnValue', () => HIDDEN_JOB_DATA);
      }
    }
    createBullBoard({ queues: adapters, serverAdapter: board, options: { uiConfig: { boardTitle: 'intake queues', ...BOARD_UI } } });
    return board.registerPlugin();
  };
  // Who sees job data is the live view's rule (gateway/live/access.ts): with a password, whoever
  // passed basic auth; once operators exist, admins and not read-only operators.
  const boards = { shown: boardOf(false), hidden: boardOf(true) };

  const app = new Koa({ proxy: false });
  // Errors are logged here, once; Koa's default handler would print stacks to stderr.
  app.silent = true;
  app.on('error', (err: Error) => log.warn({ err: err.message }, 'dashboard request failed'));
  app.use(requestLog(log));
  app.use(async (ctx, next) => {
    // No page of the dashboard loads anything from another origin (gateway/live/board-page.ts).
    ctx.set('Content-Security-Policy', DASHBOARD_CSP);
    if (ctx.method !== 'GET') return next();
    if (ctx.path === '/healthz') return healthz(ctx, next);
    if (ctx.path === '/readyz') return probes.readyz(ctx, next);
    if (ctx.path === '/metrics') return probes.metrics(ctx, next);
    // The icon shows nothing of the queues, and a browser asks for it on its own.
    // The console's two scripts hold nothing: open, like the icon.
    const script = ctx.path === CSRF_SCRIPT_PATH ? CSRF_SCRIPT : ctx.path === COPY_SCRIPT_PATH ? COPY_SCRIPT : null;
    if (script) {
      ctx.type = 'application/javascript';
      ctx.set('Cache-Control', 'public, max-age=3600');
      ctx.body = script;
      return;
    }
    const icon = ICONS.get(ctx.path);
    if (icon) {
      ctx.type = icon.type;
      ctx.set('Cache-Control', 'public, max-age=86400');
      ctx.body = icon.body;
      return;
    }
    return next();
  });
  app.use(deps.operators.routes);
  app.use(deps.admin);
  // Operators' sessions once any operator exists; until then the basic auth of DASHBOARD_PASSWORD, if set.
  app.use(deps.operators.gate(config.dashboardPassword ? basicAuth(config.dashboardUser, config.dashboardPassword) : null));
  // Every page's bar: the signed-in operator and a Log out button (none without a session).
  app.use(async (ctx, next) => {
    await next();
    if (typeof ctx.body !== 'string' || !ctx.response.is('html')) return;
    const { operator, csrfToken } = ctx.state as ConsoleState;
    ctx.body = sessionBar(ctx.body, operator && csrfToken ? { name: operator.name, role: operator.role, csrfToken } : null);
  });
  app.use(deps.keys);
  app.use(deps.pages);
  app.use(deps.live);
  app.use(async (ctx, next) => {
    await (seesPersonalData(config, ctx.state as ConsoleState) ? boards.shown : boards.hidden)(ctx, next);
    // bull-board's page (at / and at each of its client-side routes), not its API or files.
    if (typeof ctx.body === 'string' && ctx.response.is('html')) ctx.body = boardPage(ctx.body, (ctx.state as ConsoleState).csrfToken);
  });
  return app;
}

/**
 * RFC 7617 basic auth. Both sides are hashed first so the comparison is constant-time whatever
 * the lengths, and user and password are both compared before deciding, so timing reveals
 * neither which part was wrong nor how much of it matched.
 */
export function basicAuth(user: string, password: string): Koa.Middleware {
  const digest = (value: string) => createHash('sha256').update(value).digest();
  const expectedUser = digest(user);
  const expectedPassword = digest(password);
  return async function basicAuth(ctx, next) {
    const match = /^Basic +([A-Za-z0-9+/]+={0,2})$/i.exec(ctx.get('authorization'));
    const decoded = match ? Buffer.from(match[1], 'base64').toString('utf8') : '';
    const colon = decoded.indexOf(':');
    const givenUser = colon < 0 ? '' : decoded.slice(0, colon);
    const givenPassword = colon < 0 ? '' : decoded.slice(colon + 1);
    const userOk = timingSafeEqual(digest(givenUser), expectedUser);
    const passwordOk = timingSafeEqual(digest(givenPassword), expectedPassword);
    if (colon >= 0 && userOk && passwordOk) return next();
    ctx.status = 401;
    ctx.set('WWW-Authenticate', 'Basic realm="intake"');
    ctx.body = 'Unauthorized';
  };
}

/** One line per request; the path rather than the route, since bull-board's paths carry no secrets. */
function requestLog(log: Logger): Koa.Middleware {
  return async function requestLog(ctx, next) {
    const started = performance.now();
    const requestId = randomUUID();
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
    } finally {
      log.info({ requestId, method: ctx.method, path: ctx.path, status: ctx.status, ms: Math.round((performance.now() - started) * 100) / 100 });
    }
  };
}
