import type { Middleware } from 'koa';
import type { Logger } from '../../common/logger.ts';
import { ApiError, internal } from '../errors.ts';
import { routeName, type IngestState } from '../state.ts';

/** The one place an error becomes a response. Nothing of an unexpected error reaches the caller. */
export function respondErrors(log: Logger): Middleware<IngestState> {
  return async function respondErrors(ctx, next) {
    try {
      await next();
    } catch (err) {
      const known = err instanceof ApiError ? err : null;
      if (!known) {
        log.error({ requestId: ctx.state.requestId, route: routeName(ctx), err }, 'unexpected error');
      }
      const response = known ?? internal();
      ctx.status = response.status;
      if (response.headers) ctx.set(response.headers);
      ctx.body = response.body;
    }
  };
}
