import type { Middleware } from 'koa';
import { forbidden } from '../errors.ts';
import type { IngestState } from '../state.ts';

/**
 * Check 5: the key's environment must be the one the path value and the header name, and
 * must not be removed. A non-production key therefore never writes to Production.
 */
export const environmentBinding: Middleware<IngestState> = function environmentBinding(ctx, next) {
  const { environment, pathValue, environmentKey } = ctx.state;
  if (environment.removed || environment.pathValue !== pathValue || environment.environmentKey !== environmentKey) {
    throw forbidden();
  }
  return next();
};
