import { randomBytes } from 'node:crypto';
import type { Middleware } from 'koa';
import { infoLine, infoMembers, plainJson, type Logger } from '../../platform/logger.ts';
import type { RefusedContext } from '../live/refused-recorder.ts';
import { routeName, type IngestState } from '../state.ts';
import { answerError, serializeBody } from './respond-errors.ts';

/** Called once per answered request with its route name (`unmatched` for the plain-text 404), status and latency. */
export type ObserveRequest = (route: string, status: number, seconds: number) => void;

/** Called after the answer of a request answerError refused with a 4xx (its refusal set), and of no other. */
export type ObserveRefused = (ctx: RefusedContext, route: string, status: number, refusal: string) => void;

/**
 * A request's id: this process's random prefix and its count of requests. Unique across the
 * gateway's processes and restarts (48 random bits per process), and a counter where a
 * random UUID per request would read the entropy pool.
 */
export function requestIds(): () => string {
  const prefix = `${randomBytes(6).toString('hex')}-`;
  let served = 0;
  return () => prefix + (++served).toString(36);
}

/**
 * Outermost: turns what the rest threw into its answer (respond-errors.ts: here rather than in a
 * middleware of its own, which cost every request a dispatch and an awaited promise), stamps the
 * receipt time (on the trusted clock, PostgreSQL's: platform/trusted-clock.ts) and request id,
 * and logs one line with the final status. The same measurement feeds the
 * request metrics (one layer and one clock read fewer than a middleware of their own on Track's
 * hot path). The line's members are written here, in the order infoLine would write them.
 * `refused`: the Refused calls page's recorder (gateway/live/refused-recorder.ts).
 */
export function requestLog(log: Logger, observe: ObserveRequest, now: () => number, refused?: ObserveRefused): Middleware<IngestState> {
  const line = infoMembers(log) ?? slowLine(log);
  const nextId = requestIds();
  return async function requestLog(ctx, next) {
    const started = performance.now();
    const requestId = nextId();
    ctx.state.receivedAt = now();
    ctx.state.requestId = requestId;
    try {
      await next();
      serializeBody(ctx);
    } catch (err) {
      answerError(ctx, err, log);
    } finally {
      // An answer written straight to Node's response (answers.ts) carries it already.
      if (!ctx.res.headersSent) ctx.res.setHeader('X-Request-Id', requestId);
      const ms = performance.now() - started;
      const route = routeName(ctx);
      const status = ctx.status;
      observe(route ?? 'unmatched', status, ms / 1000);
      const refusal = ctx.state.refusal;
      // Refused calls only: an accepted request does not get past this comparison.
      if (refusal !== undefined && refused !== undefined) refused(ctx, route ?? 'unmatched', status, refusal);
      if (line.enabled()) {
        // The id and the route names are ours, and the method one of the HTTP parser's (capital
        // letters and '-'): plain ASCII, written without a serializer.
        let members = `,"requestId":"${requestId}","method":"${ctx.method}","route":${route === null ? 'null' : `"${route}"`}`;
        members += `,"status":${status},"ms":${Math.round(ms * 100) / 100}`;
        line.write(refusal === undefined ? members : `${members},"refusal":${plainJson(refusal)}`);
      }
    }
  };
}

/** A logger made elsewhere (tests): its members parsed back into fields for log.info. */
function slowLine(log: Logger) {
  const write = infoLine(log);
  return { enabled: () => log.isLevelEnabled('info'), write: (members: string) => write(JSON.parse(`{${members.slice(1)}}`)) };
}
