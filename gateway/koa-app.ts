// Koa without one cost per request. Koa's handleRequest first registers on-finished on the
// response (an AsyncResource and listeners on the response and its socket, removed again when it
// ends) so that a response or socket error reaches ctx.onerror. On the gateway that call does
// nothing: the app is silent, and an answer cannot be written to a socket that failed. Those
// listeners cost Track about 7 % of its CPU per request, so a request whose answer the
// middleware wrote straight to Node's response (answers.ts: `ctx.respond = false`) never has them.
// Any other answer (an error, the 404, health, metrics) is then written by Koa's own
// handleRequest, exactly as before.
import type { ParameterizedContext } from 'koa';
import Koa from 'koa';

type Context = ParameterizedContext;
type Chain = (ctx: Context) => Promise<unknown>;

/** Koa's own handleRequest: not in Koa's published types, so reached through its prototype (test/gateway/koa-app.test.ts checks it is there). */
const koaHandleRequest = (Koa.prototype as unknown as { handleRequest: (this: Koa, ctx: Context, chain: Chain) => Promise<unknown> }).handleRequest;

export class GatewayKoa<State = Koa.DefaultState> extends Koa<State> {
  /** Called by Koa's callback() for each request. */
  handleRequest(ctx: Context, chain: Chain): Promise<unknown> {
    const res = ctx.res;
    // Koa's default status until a middleware sets one.
    res.statusCode = 404;
    return chain(ctx)
      .then(() => {
        if (ctx.respond === false) return;
        // Koa's handleRequest sets 404 again before it runs its chain: this chain puts back the
        // status the middleware set, then Koa writes the answer.
        const { statusCode, statusMessage } = res;
        return koaHandleRequest.call(this as Koa, ctx, () => {
          res.statusCode = statusCode;
          res.statusMessage = statusMessage;
          return Promise.resolve();
        });
      })
      .catch((err: Error) => ctx.onerror(err));
  }
}
