// The queue dashboard (`intake dashboard`): bull-board over the product's queues on its own
// port, so it can be published (or not) separately from the ingest API.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { KoaAdapter } from '@bull-board/koa';
import type { Queue } from 'bullmq';
import Koa from 'koa';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Db } from '../common/db.ts';
import { registerQueueDepth } from '../common/queue-depth.ts';
import { healthz, metrics, readyz } from './handlers/health.ts';
import type { Config } from '../common/config.ts';
import { drain, listen } from '../common/listen.ts';
import { answerClientError } from './client-error.ts';
import type { Logger } from '../common/logger.ts';
import { closeQueues, createDeadLetterQueue, createEventsQueue, createServiceEventsQueue } from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';

export interface Dashboard {
  port: number;
  close(): Promise<void>;
}

type DashboardConfig = Pick<
  Config,
  | 'redisUrl'
  | 'queuePrefix'
  | 'jobAttempts'
  | 'jobBackoffMs'
  | 'host'
  | 'dashboardPort'
  | 'dashboardUser'
  | 'dashboardPassword'
  | 'dashboardReadOnly'
  | 'shutdownTimeoutMs'
>;

/** Listen on config.dashboardPort (0 picks a free one); rejects when the port is taken. */
export async function startDashboard(deps: { config: DashboardConfig; db: Db; log: Logger }): Promise<Dashboard> {
  const { config, db, log } = deps;
  // The port is taken before anything else is opened, so a taken port (which `intake dev`
  // tolerates) leaves no Redis connection behind.
  const server = http.createServer();
  // Malformed HTTP gets a JSON error as on the gateway, not Node's empty body.
  server.on('clientError', answerClientError);
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  const port = await listen(server, config.dashboardPort, config.host);

  // Fail-fast profile: while Redis is away a page load errors at once instead of hanging.
  const redis = createRedis(config, 'producer', log);
  // The same factories as the producers, so a job added from the dashboard gets the product's retry policy.
  // Each events job is one gateway batch (its name says how many events it carries); the dead-letter
  // queue holds one job per refused event, which an operator retries here (unless read-only).
  const queues = [createEventsQueue(config, redis), createDeadLetterQueue(config, redis), createServiceEventsQueue(config, redis)];
  for (const queue of queues) queue.on('error', (err) => log.warn({ err: err.message, queue: queue.name }, 'dashboard queue'));
  // Like every process: /healthz, /readyz and /metrics, open (no dashboard credentials).
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerQueueDepth(registry, Object.fromEntries(queues.map((queue) => [queue.name, queue])), 1000);
  const probes = { readyz: readyz({ db, redis }), metrics: metrics(registry) };
  server.on('request', createDashboardApp({ config, queues, probes, log }).callback());

  if (!config.dashboardPassword) {
    log.warn(
      { port, readOnly: config.dashboardReadOnly },
      'dashboard is unauthenticated (DASHBOARD_PASSWORD is not set): anyone who reaches its port can use it',
    );
  }
  log.info({ port, queues: queues.map((q) => q.name), readOnly: config.dashboardReadOnly, auth: Boolean(config.dashboardPassword) }, 'dashboard listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= (async () => {
        await drain(server, config.shutdownTimeoutMs);
        await closeQueues(queues, redis);
        log.info('dashboard stopped');
      })()),
  };
}

/** healthz, readyz and metrics (open) → basic auth when a password is set → bull-board (UI at /, JSON API under /api). */
function createDashboardApp(deps: { config: DashboardConfig; queues: Queue[]; probes: { readyz: Koa.Middleware; metrics: Koa.Middleware }; log: Logger }): Koa {
  const { config, queues, probes, log } = deps;
  const board = new KoaAdapter();
  createBullBoard({
    queues: queues.map((queue) => new BullMQAdapter(queue, { readOnlyMode: config.dashboardReadOnly })),
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'intake queues' } },
  });

  const app = new Koa({ proxy: false });
  // Errors are logged here, once; Koa's default handler would print stacks to stderr.
  app.silent = true;
  app.on('error', (err: Error) => log.warn({ err: err.message }, 'dashboard request failed'));
  app.use(requestLog(log));
  app.use(async (ctx, next) => {
    if (ctx.method !== 'GET') return next();
    if (ctx.path === '/healthz') return healthz(ctx, next);
    if (ctx.path === '/readyz') return probes.readyz(ctx, next);
    if (ctx.path === '/metrics') return probes.metrics(ctx, next);
    return next();
  });
  if (config.dashboardPassword) app.use(basicAuth(config.dashboardUser, config.dashboardPassword));
  app.use(board.registerPlugin());
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
