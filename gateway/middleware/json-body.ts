import bodyParser from 'koa-bodyparser';
import type { Context, Middleware } from 'koa';
import type { ApiError } from '../errors.ts';
import type { IngestState } from '../state.ts';

export interface BodyErrors {
  /** The raw body is over the route's cap (checked from Content-Length before reading). */
  tooLarge: () => ApiError;
  /** Not JSON at all (including an empty body). */
  notJson: () => ApiError;
}

/**
 * Check 6a: read and parse the body as JSON whatever the Content-Type says (it is only
 * recommended). Scalars and null are passed on so validation can name their type, and a
 * `__proto__` key is ordinary data (JSON.parse makes it an own property).
 */
export function jsonBody(limitBytes: number, errors: BodyErrors): Middleware<IngestState> {
  const parse = bodyParser({
    enableTypes: ['json'],
    detectJSON: () => true,
    strict: false,
    jsonLimit: String(limitBytes),
    // co-body's option (passed through to @hapi/bourne's protoAction); its default rejects the key.
    onProtoPoisoning: 'ignore',
    onerror: (err: Error & { status?: number }, ctx: Context) => {
      if (err.status === 413) {
        // Do not read the rest of an oversized upload.
        ctx.set('Connection', 'close');
        throw errors.tooLarge();
      }
      throw errors.notJson();
    },
  } as bodyParser.Options & { onProtoPoisoning: string });

  return async function jsonBody(ctx, next) {
    await parse(ctx, async () => {
      const body = ctx.request.body;
      // An empty body parses to '' as well; the JSON text `""` is a string, and validation names it so.
      if (body === undefined || ctx.request.rawBody === '') throw errors.notJson();
      ctx.state.body = body;
      await next();
    });
  };
}
