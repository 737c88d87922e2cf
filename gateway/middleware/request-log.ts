import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Logger } from '../../common/logger.ts';
import { routeName, type IngestState } from '../state.ts';

/** Outermost: stamps the receipt time and request id, and logs one line with the final status. */
export function requestLog(log: Logger): Middleware<IngestState> {
  return async function requestLog(ctx, next) {
    const started = performance.now();
    ctx.state.receivedAt = Date.now();
    ctx.state.requestId = randomUUID();
    ctx.set('X-Request-Id', ctx.state.requestId);
    try {
      await next();
    } finally {
      log.info({
        requestId: ctx.state.requestId,
        method: ctx.method,
        route: routeName(ctx),
        status: ctx.status,
        ms: Math.round((performance.now() - started) * 100) / 100,
      });
    }
  };
}
