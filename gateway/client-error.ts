// Requests Node's HTTP parser refuses before any middleware sees them. Node would answer each
// with a bare status line and no body; a request line whose target holds bytes a URL cannot
// (unencoded non-ASCII, control characters) or whose method is no HTTP method names nothing
// the spec serves, so it gets the spec's answer for that: the plain-text 404. Every other
// parse error keeps Node's own answer.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

const NOT_FOUND = Buffer.from(
  'HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n404 Not Found',
);
const bare = (status: number) => Buffer.from(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`);
const ANSWERS: Record<string, Buffer> = {
  HPE_INVALID_URL: NOT_FOUND,
  HPE_INVALID_METHOD: NOT_FOUND,
  // Node's own answers (lib/_http_server.js socketOnError)
  HPE_HEADER_OVERFLOW: bare(431),
  HPE_CHUNK_EXTENSIONS_OVERFLOW: bare(413),
  ERR_HTTP_REQUEST_TIMEOUT: bare(408),
};
const BAD_REQUEST = bare(400);

/** The server's `clientError` listener: what Node does by default, with the answers above. */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // As Node: answer only while no response of this connection has started, then close.
  const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !current?.headersSent) socket.write(ANSWERS[err.code ?? ''] ?? BAD_REQUEST);
  socket.destroy();
}
