import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import { infoLine, type Logger } from '../../platform/logger.ts';
import { routeName, type IngestState } from '../state.ts';

/** Called once per answered request with its route name (`unmatched` for the plain-text 404), status and latency. */
export type ObserveRequest = (route: string, status: number, seconds: number) => void;

/**
 * Outermost: stamps the receipt time (on the trusted clock, PostgreSQL's: platform/trusted-clock.ts)
 * and request id, and logs one line with the final status. The same measurement feeds the
 * request metrics (one layer and one clock read fewer than a middleware of their own on Track's
 * hot path).
 */
export function requestLog(log: Logger, observe: ObserveRequest, now: () => number): Middleware<IngestState> {
  const logLine = infoLine(log);
  return async function requestLog(ctx, next) {
    const started = performance.now();
    ctx.state.receivedAt = now();
    ctx.state.requestId = randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    try {
      await next();
    } finally {
      const ms = performance.now() - started;
      const route = routeName(ctx);
      observe(route ?? 'unmatched', ctx.status, ms / 1000);
      const line = { requestId: ctx.state.requestId, method: ctx.method, route, status: ctx.status, ms: Math.round(ms * 100) / 100 };
      logLine(ctx.state.refusal === undefined ? line : { ...line, refusal: ctx.state.refusal });
    }
  };
}
