import type { Context, Middleware } from 'koa';
import { readBodyText } from '../read-body.ts';
import type { ApiError } from '../errors.ts';
import type { IngestState } from '../state.ts';

export interface BodyErrors {
  /** The raw body is over the route's cap (checked from Content-Length before reading). */
  tooLarge: () => ApiError;
  /** Not readable as text (an aborted upload, an unknown Content-Encoding). */
  notJson: () => ApiError;
}

/**
 * Check 6a: read the body as UTF-8 text whatever the Content-Type says (JSON is only
 * recommended), up to the route's cap (read-body.ts: koa-bodyparser's limits, Content-Encoding
 * and early 413). It is parsed by the next step, on or off the event loop by its size
 * (json-pool.ts).
 */
export function jsonBody(limitBytes: number, errors: BodyErrors): Middleware<IngestState> {
  return async function jsonBody(ctx: Context, next) {
    let text: string;
    try {
      text = await readBodyText(ctx.req, limitBytes);
    } catch (err) {
      if ((err as { status?: number }).status === 413) {
        // Do not read the rest of an oversized upload.
        ctx.set('Connection', 'close');
        throw errors.tooLarge();
      }
      throw errors.notJson();
    }
    ctx.state.rawBody = text;
    await next();
  };
}
