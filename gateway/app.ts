import type Koa from 'koa';
import { GatewayKoa } from './koa-app.ts';
import type { Logger } from '../platform/logger.ts';
import { notFound } from './middleware/not-found.ts';
import { requestLog, type ObserveRefused, type ObserveRequest } from './middleware/request-log.ts';
import type { TrustedClock } from '../platform/trusted-clock.ts';
import { dispatchRoutes } from './route-dispatch.ts';
import { createRouter, type GatewayDeps } from './routes.ts';
import type { IngestState } from './state.ts';

/**
 * requestLog (the request metrics, and every error's answer) → routes → notFound. `router.allowedMethods()` is not mounted:
 * it would answer OPTIONS and 405, where the spec wants the plain-text 404 for both.
 */
export function createApp(
  deps: GatewayDeps & { log: Logger; observeRequest: ObserveRequest; clock: Pick<TrustedClock, 'now'>; observeRefused?: ObserveRefused },
): Koa<IngestState> {
  const app = new GatewayKoa<IngestState>({ proxy: false });
  // Errors are logged once, by answerError; Koa's default handler would print stacks to stderr.
  app.silent = true;
  app.use(requestLog(deps.log, deps.observeRequest, deps.clock.now, deps.observeRefused));
  app.use(dispatchRoutes(createRouter(deps)));
  app.use(notFound);
  return app;
}
