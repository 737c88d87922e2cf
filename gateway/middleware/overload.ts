import type { Middleware } from 'koa';
import { tooManyRequests } from '../errors.ts';
import type { IngestState } from '../state.ts';

export interface OverloadGuard {
  /** First in each API route's chain (after the route matched): counts the request while it is handled. */
  middleware: Middleware<IngestState>;
  /** Requests being handled now. */
  inFlight(): number;
  /** Requests refused since start. */
  refusals(): number;
}

/**
 * At most `maxInFlight` Identify, Track and Profiles requests at once per gateway; one more
 * is refused at once (429 with Retry-After, before its body is read) instead of queueing
 * behind a slow dependency. Health probes and /metrics are not routed through it.
 */
export function createOverloadGuard(maxInFlight: number): OverloadGuard {
  let inFlight = 0;
  let refusals = 0;
  // One instance for every refusal: it carries nothing of the request, and refusing allocates nothing.
  const refusal = tooManyRequests();
  return {
    middleware: async function overload(ctx, next) {
      if (inFlight >= maxInFlight) {
        refusals++;
        throw refusal;
      }
      inFlight++;
      try {
        await next();
      } finally {
        inFlight--;
      }
    },
    inFlight: () => inFlight,
    refusals: () => refusals,
  };
}
