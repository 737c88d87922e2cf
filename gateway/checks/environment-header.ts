import { readEnvironmentHeader } from '../../environments/environment-header.ts';
import { forbidden, invalidEnvironment } from '../errors.ts';
import type { IngestContext } from './chain.ts';

/** Check 3: `X-Service-Environment` format (400), and `production` (403). */
export function environmentHeader(ctx: IngestContext): void {
  const header = readEnvironmentHeader(ctx.req.headers['x-service-environment']);
  if (header.kind === 'invalid') throw invalidEnvironment();
  if (header.kind === 'production') throw forbidden();
  ctx.state.environmentKey = header.key;
}
