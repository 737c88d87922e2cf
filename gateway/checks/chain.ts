// A route's checks and its answer, run by ONE Koa middleware as plain calls in the route table's
// order (rudder-server's validator mediator). A step is awaited only when it returns a promise:
// a body still arriving, a key PostgreSQL must confirm, a large body parsed off the event loop,
// the enqueue. As a Koa middleware each, every step would cost a request a dispatch, a bound
// `next` and an awaited promise, whether or not it waits for anything.
import type { RouterContext } from '@koa/router';
import type { Middleware } from 'koa';
import type { IngestState } from '../state.ts';

export type IngestContext = RouterContext<IngestState>;

/** What a step returns when it has answered the request itself: the steps after it do not run. */
export const ANSWERED = 'answered';

/** Undefined: on to the next step. A refusal is thrown: an ApiError, turned into the answer by middleware/respond-errors.ts. */
export type StepResult = void | typeof ANSWERED;

export type Step = (ctx: IngestContext) => StepResult | Promise<StepResult>;

/** `end`: called once the steps have ended, however far they got (it gives back what a step took). */
export function checkChain(steps: readonly Step[], end?: (ctx: IngestContext) => void): Middleware<IngestState> {
  return async function checks(ctx) {
    const context = ctx as IngestContext;
    try {
      for (const step of steps) {
        let result = step(context);
        if (result instanceof Promise) result = await result;
        if (result === ANSWERED) return;
      }
    } finally {
      end?.(context);
    }
  };
}
