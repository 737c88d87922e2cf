import type { Context, Middleware } from 'koa';
import { readBodyText } from '../read-body.ts';
import { requestTimeout, type ApiError } from '../errors.ts';
import type { Admission } from '../admission.ts';
import type { UploadWatch } from '../upload-watch.ts';
import type { IngestState } from '../state.ts';

export interface BodyErrors {
  /** The raw body is over the route's cap (checked from Content-Length before reading). */
  tooLarge: () => ApiError;
  /** Not readable as text (an aborted upload, an unknown Content-Encoding). */
  notJson: () => ApiError;
}

/** The bounds every body is read within (gateway/admission.ts, gateway/upload-watch.ts). */
export interface Uploads {
  admission: Pick<Admission, 'beginUpload' | 'endUpload'>;
  watch: UploadWatch;
}

/**
 * Check 6a: read the body as UTF-8 text whatever the Content-Type says (JSON is only
 * recommended), up to the route's cap (read-body.ts: koa-bodyparser's limits, Content-Encoding
 * and early 413). It is parsed by the next step, on or off the event loop by its size
 * (json-pool.ts). A body not yet whole is an upload: it first takes an upload slot of its
 * environment (or 429, the body unread) and is cut with 408 when it arrives too slowly. A body
 * already whole waits on nothing and takes no slot.
 */
export function jsonBody(limitBytes: number, errors: BodyErrors, uploads: Uploads): Middleware<IngestState> {
  return async function jsonBody(ctx: Context, next) {
    const req = ctx.req;
    // Node's parser has read the whole message already (say, while the key lookup waited on
    // PostgreSQL). Usually it has not: the checks run between the parser's callback for the
    // headers and the one for a body even in the same packet, so nearly every body is an upload
    // for a moment, and one that is truly slow stays one.
    const whole = req.complete;
    const environmentId: string = ctx.state.environment.id;
    if (!whole) uploads.admission.beginUpload(environmentId);
    let text: string;
    try {
      text = await readBodyText(req, limitBytes, whole ? null : uploads.watch);
    } catch (err) {
      const status = (err as { status?: number }).status;
      if (status === 413) {
        // Do not read the rest of an oversized upload.
        ctx.set('Connection', 'close');
        throw errors.tooLarge();
      }
      if (status === 408) throw requestTimeout();
      throw errors.notJson();
    } finally {
      if (!whole) uploads.admission.endUpload(environmentId);
    }
    ctx.state.rawBody = text;
    await next();
  };
}
