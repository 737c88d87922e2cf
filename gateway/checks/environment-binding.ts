import { forbidden } from '../errors.ts';
import type { IngestContext } from './chain.ts';

/**
 * Check 5: the key's environment must be the one the path value and the header name, and
 * must not be removed. A non-production key therefore never writes to Production.
 */
export function environmentBinding(ctx: IngestContext): void {
  const { environment, pathValue, environmentKey } = ctx.state;
  if (environment.removed || environment.pathValue !== pathValue || environment.environmentKey !== environmentKey) {
    throw forbidden();
  }
}
