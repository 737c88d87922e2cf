import { lingerAfterAnswer } from '../linger.ts';
import { readBodyText } from '../read-body.ts';
import { requestTimeout, tooManyRequests, type ApiError } from '../errors.ts';
import type { Admission, EnvironmentSlots, UploadSlot } from '../admission.ts';
import type { Upload, UploadWatch } from '../upload-watch.ts';
import type { IngestContext, Step } from './chain.ts';

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

// An upload taken back for another environment is refused as if it had not been admitted: the rest of its body is not read.
const takenBack = tooManyRequests(true);

/**
 * One upload: its slot, and the watch readBodyText registers its body with (forwarded to the
 * gateway's), which it remembers so that the admission can cut the read when it takes the slot
 * back. The cut is the watch's own (readBodyText fails with 408), told apart by `reclaimed`.
 */
class WatchedUpload implements UploadSlot, UploadWatch {
  holder: EnvironmentSlots | null = null;
  place = -1;
  reclaimed = false;
  private upload: Upload | null = null;
  constructor(private readonly uploads: UploadWatch) {}
  watch(cut: () => void): Upload {
    return (this.upload = this.uploads.watch(cut));
  }
  unwatch(upload: Upload): void {
    this.uploads.unwatch(upload);
    this.upload = null;
  }
  reclaim(): void {
    this.reclaimed = true;
    const upload = this.upload;
    // None once the read has ended, or when it never watched (413 from Content-Length): nothing to stop.
    if (!upload) return;
    this.unwatch(upload);
    upload.cut();
  }
  // The rest of an UploadWatch, which readBodyText does not use: the gateway's, which the server closes.
  active(): number {
    return this.uploads.active();
  }
  cuts(): number {
    return this.uploads.cuts();
  }
  close(): void {}
}

/**
 * Check 6a: read the body as UTF-8 text whatever the Content-Type says (JSON is only
 * recommended), up to the route's cap (read-body.ts: koa-bodyparser's limits, Content-Encoding
 * and early 413). It is parsed by the next step, on or off the event loop by its size
 * (json-pool.ts). A body not yet whole is an upload: it first takes an upload slot of its
 * environment (or 429, the body unread), is cut with 408 when it arrives too slowly, and with
 * 429 when the admission takes its slot back for an environment holding fewer. A body already
 * whole waits on nothing and takes no slot.
 */
export function jsonBody(limitBytes: number, errors: BodyErrors, uploads: Uploads): Step {
  return function jsonBody(ctx) {
    const req = ctx.req;
    // Node's parser has read the whole message already (say, while the key lookup waited on
    // PostgreSQL). Usually it has not: the checks run between the parser's callback for the
    // headers and the one for a body even in the same packet, so nearly every body is an upload
    // for a moment, and one that is truly slow stays one.
    const upload = req.complete ? null : new WatchedUpload(uploads.watch);
    if (upload) uploads.admission.beginUpload(ctx.state.environment.id, upload);
    return readBodyText(req, limitBytes, upload).then(
      (text) => {
        if (upload) uploads.admission.endUpload(upload);
        ctx.state.rawBody = text;
      },
      (err: unknown) => {
        if (upload) uploads.admission.endUpload(upload);
        throw refusal(ctx, err, errors, upload);
      },
    );
  };
}

/** What a body that could not be read is answered. */
function refusal(ctx: IngestContext, err: unknown, errors: BodyErrors, upload: WatchedUpload | null): ApiError {
  const status = (err as { status?: number }).status;
  if (status === 413) {
    // The rest of an oversized upload is not read as a body, only dropped while the connection lingers.
    ctx.set('Connection', 'close');
    lingerAfterAnswer(ctx.req);
    return errors.tooLarge();
  }
  if (status === 408) return upload?.reclaimed ? takenBack : requestTimeout();
  return errors.notJson();
}
