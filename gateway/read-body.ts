// A request body as UTF-8 text, within a byte limit. An uncompressed body (every ordinary call)
// is read here: co-body's reader (raw-body) cost about a tenth of Track's CPU per request (an
// async resource, a streaming decoder and a string concatenation per chunk) for what is one
// Buffer.concat. A body with a Content-Encoding goes through co-body, which inflates it. The
// answers are co-body's in both cases: status 413 past the limit (from Content-Length before
// reading), 400 for an aborted body or one shorter than its Content-Length, a leading BOM dropped.
// A body read under an upload watch (one not yet whole when the checks before it ended) fails
// with 408 when the watch finds it too slow (upload-watch.ts).
// Both paths decode the bytes in one place (decodeUtf8), which refuses what is not UTF-8.
import type { IncomingMessage } from 'node:http';
import coBody from 'co-body';
import type { Upload, UploadWatch } from './upload-watch.ts';

/** What went wrong reading the body: 413 (over the limit), 408 (too slow) or 400 (aborted, short, not UTF-8, not decodable). */
export class BodyReadError extends Error {
  constructor(readonly status: 400 | 408 | 413) {
    super(status === 413 ? 'request entity too large' : status === 408 ? 'request body too slow' : 'request body could not be read');
  }
}

/** `watch`: null when the body is already whole (nothing to wait for), else the watch that cuts it when too slow. */
export function readBodyText(req: IncomingMessage, limit: number, watch: UploadWatch | null): Promise<string> {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') return readEncoded(req, limit, watch);
  const header = req.headers['content-length'];
  // As co-body reads it.
  const length = header ? ~~header : null;
  if (length !== null && length > limit) return Promise.reject(new BodyReadError(413));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    let upload: Upload | null = null;
    const settle = (status: 400 | 408 | 413 | null) => {
      req.off('data', onData).off('end', onEnd).off('aborted', onFail).off('error', onFail).off('close', onFail);
      if (upload) watch!.unwatch(upload);
      if (status !== null) {
        // Stop reading; the caller answers and closes the connection.
        req.pause();
        return reject(new BodyReadError(status));
      }
      try {
        resolve(decodeUtf8(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received)));
      } catch (err) {
        reject(err);
      }
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (upload) upload.received = received;
      if (received > limit) settle(413);
      else chunks.push(chunk);
    };
    const onEnd = () => settle(length !== null && received !== length ? 400 : null);
    const onFail = () => settle(400);
    req.on('data', onData).on('end', onEnd).on('aborted', onFail).on('error', onFail).on('close', onFail);
    if (watch) upload = watch.watch(() => settle(408));
  });
}

/** Through co-body, which inflates; under a watch, the compressed bytes received count as progress. */
function readEncoded(req: IncomingMessage, limit: number, watch: UploadWatch | null): Promise<string> {
  const read = coBody.text(req, { limit, ...AS_BYTES }).then(
    (bytes: Buffer) => decodeUtf8(bytes),
    (err: { status?: number }) => {
      throw new BodyReadError(err?.status === 413 ? 413 : 400);
    },
  );
  if (!watch) return read;
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => void (upload.received += chunk.length);
    const done = () => {
      watch.unwatch(upload);
      req.off('data', onData);
    };
    const upload = watch.watch(() => {
      done();
      req.pause();
      reject(new BodyReadError(408));
    });
    req.on('data', onData);
    read.then(
      (text) => (done(), resolve(text)),
      (err: unknown) => (done(), reject(err)),
    );
  });
}

// co-body turns only an undefined encoding into utf8; with a falsy one raw-body hands back the bytes.
const AS_BYTES = { encoding: false } as unknown as { encoding: string };

// Fatal: bytes that are not UTF-8 are refused, never replaced by U+FFFD, which would make two
// events that differ in one invalid byte one event. Such a body is not JSON (RFC 8259 §8.1).
// Node's UTF-8 fast path validates while it decodes (simdutf), at the cost of toString('utf8').
// Not ignoreBOM: a leading BOM is dropped, as co-body does.
const UTF8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(bytes: Uint8Array): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new BodyReadError(400);
  }
}
