// A request whose headers and first body bytes are on the wire while the rest is held back: an
// upload the gateway is reading (a slow or stalled client). Raw sockets, so the test decides
// when each byte goes and sees exactly what comes back, and when the gateway closes.
import net from 'node:net';

export interface RawAnswer {
  status: number;
  /** Lowercased names. */
  headers: Record<string, string>;
  body: string;
}

/** One response parsed from raw bytes, or undefined while incomplete. */
export function parseRawAnswer(raw: string): RawAnswer | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const [statusLine, ...lines] = raw.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const body = raw.slice(end + 4);
  if (Buffer.byteLength(body) < length) return undefined;
  return { status: Number(statusLine.split(' ')[1]), headers, body: body.slice(0, length) };
}

export interface HeldUpload {
  /** The answer and how long after the headers were written it came; undefined when the connection closed without one. */
  answer: Promise<(RawAnswer & { ms: number }) | undefined>;
  /** Resolves once the connection is closed (by either side), with ms since the headers were written. */
  closed: Promise<number>;
  /** Sends more of the body (ignored once the connection is closed). */
  send(bytes: Buffer | string): void;
  destroy(): void;
}

/**
 * A POST to `path` with `headers` (Content-Length, the key, ...), then `first` bytes of its body,
 * then nothing until `send`. The request goes on a connection of its own.
 */
export function holdUpload(url: string, path: string, headers: Record<string, string | number>, first: Buffer | string): HeldUpload {
  const socket = net.connect(Number(new URL(url).port), '127.0.0.1');
  let received = '';
  let sentAt = performance.now();
  let settle!: (a: (RawAnswer & { ms: number }) | undefined) => void;
  const answer = new Promise<(RawAnswer & { ms: number }) | undefined>((resolve) => (settle = resolve));
  socket.setEncoding('latin1');
  socket.on('data', (chunk: string) => {
    received += chunk;
    const parsed = parseRawAnswer(received);
    if (parsed) settle({ ...parsed, ms: performance.now() - sentAt });
  });
  // A reset after the answer (the gateway closing on unread bytes) is expected.
  socket.on('error', () => {});
  const closed = new Promise<number>((resolve) =>
    socket.on('close', () => {
      settle(undefined);
      resolve(performance.now() - sentAt);
    }),
  );
  const head = `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  // Written at once (net holds it until connected), so a `send` right after goes after it.
  socket.write(Buffer.concat([Buffer.from(head, 'latin1'), Buffer.from(first)]));
  socket.on('connect', () => (sentAt = performance.now()));
  return {
    answer,
    closed,
    send: (bytes) => void (!socket.destroyed && socket.write(bytes)),
    destroy: () => void socket.destroy(),
  };
}
