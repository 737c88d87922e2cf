// A request body as UTF-8 text, within a byte limit. An uncompressed body (every ordinary call)
// is read here: co-body's reader (raw-body) cost about a tenth of Track's CPU per request (an
// async resource, a streaming decoder and a string concatenation per chunk) for what is one
// Buffer.concat. A body with a Content-Encoding goes through co-body, which inflates it. The
// answers are co-body's in both cases: status 413 past the limit (from Content-Length before
// reading), 400 for an aborted body or one shorter than its Content-Length, a leading BOM dropped.
import type { IncomingMessage } from 'node:http';
import coBody from 'co-body';

/** What went wrong reading the body: 413 (over the limit) or 400 (aborted, short, not decodable). */
export class BodyReadError extends Error {
  constructor(readonly status: 400 | 413) {
    super(status === 413 ? 'request entity too large' : 'request body could not be read');
  }
}

export function readBodyText(req: IncomingMessage, limit: number): Promise<string> {
  const encoding = req.headers['content-encoding'];
  if (encoding !== undefined && encoding !== 'identity') {
    return coBody.text(req, { limit, encoding: 'utf8' }).catch((err: { status?: number }) => {
      throw new BodyReadError(err?.status === 413 ? 413 : 400);
    });
  }
  const header = req.headers['content-length'];
  // As co-body reads it.
  const length = header ? ~~header : null;
  if (length !== null && length > limit) return Promise.reject(new BodyReadError(413));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (status: 400 | 413 | null) => {
      req.off('data', onData).off('end', onEnd).off('aborted', onFail).off('error', onFail).off('close', onFail);
      if (status !== null) {
        // Stop reading; the caller answers and closes the connection.
        req.pause();
        return reject(new BodyReadError(status));
      }
      const text = (chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, received)).toString('utf8');
      resolve(text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) settle(413);
      else chunks.push(chunk);
    };
    const onEnd = () => settle(length !== null && received !== length ? 400 : null);
    const onFail = () => settle(400);
    req.on('data', onData).on('end', onEnd).on('aborted', onFail).on('error', onFail).on('close', onFail);
  });
}
