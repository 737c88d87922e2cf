// Requests Node's HTTP parser refuses before any middleware sees them. Node would answer each
// with a bare status line and no body, but the contract makes every response JSON except the
// plain-text 404. A request line whose target holds bytes a URL cannot (unencoded non-ASCII,
// control characters) or whose method is no HTTP method names nothing the spec serves, so it
// gets the spec's answer for that: the plain-text 404. Every other parse error keeps Node's
// status with a JSON `error` (README, "Decisions where the specification is silent"), and the
// connection is closed: after a framing error nothing more on it can be read reliably.
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';

const NOT_FOUND = Buffer.from(
  'HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n404 Not Found',
);

/** The JSON answer to a refused request: Node's status, its reason phrase in sentence case under `error`. */
export function clientErrorAnswer(status: number): Buffer {
  const reason = STATUS_CODES[status] ?? 'Bad Request';
  const body = JSON.stringify({ error: reason[0] + reason.slice(1).toLowerCase() });
  return Buffer.from(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

const ANSWERS: Record<string, Buffer> = {
  HPE_INVALID_URL: NOT_FOUND,
  HPE_INVALID_METHOD: NOT_FOUND,
  // Node's own statuses (lib/_http_server.js socketOnError); a URL too long overflows the header limit too.
  HPE_HEADER_OVERFLOW: clientErrorAnswer(431),
  HPE_CHUNK_EXTENSIONS_OVERFLOW: clientErrorAnswer(413),
  ERR_HTTP_REQUEST_TIMEOUT: clientErrorAnswer(408),
};
// Bad chunk sizes, Transfer-Encoding with Content-Length, two Content-Lengths, bad header names…
const BAD_REQUEST = clientErrorAnswer(400);

/** The server's `clientError` listener: what Node does by default, with the answers above. */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  // As Node: answer only while no response of this connection has started, then close.
  const current = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !current?.headersSent) socket.write(ANSWERS[err.code ?? ''] ?? BAD_REQUEST);
  socket.destroy();
}
