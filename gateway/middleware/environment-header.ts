import type { Middleware } from 'koa';
import { readEnvironmentHeader } from '../../environments/environment-header.ts';
import { forbidden, invalidEnvironment } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** Check 3: `X-Service-Environment` format (400), and `production` (403). */
export const environmentHeader: Middleware<IngestState> = function environmentHeader(ctx, next) {
  const header = readEnvironmentHeader(ctx.req.headers['x-service-environment']);
  if (header.kind === 'invalid') throw invalidEnvironment();
  if (header.kind === 'production') throw forbidden();
  ctx.state.environmentKey = header.key;
  return next();
};
