// Answers Node's HTTP server would write itself, before or instead of any middleware. Node
// would answer each with a bare status line and no body, but the contract makes every response
// JSON except the plain-text 404.
// - Requests its parser refuses ('clientError'). A request line whose target holds bytes a URL
//   cannot (unencoded non-ASCII, control characters) or whose method is no HTTP method names
//   nothing the spec serves, so it gets the spec's answer for that: the plain-text 404. Every
//   other parse error keeps Node's status with a JSON `error` (docs/decisions.md, "Requests Node's HTTP parser refuses"), and the
//   connection is closed: after a framing error nothing more on it can be read reliably.
// - An Expect other than 100-continue ('checkExpectation'): 417 with a JSON `error`, and the
//   connection closed, since the client may hold its body back waiting for a 100 that will not
//   come, and Node would wait to discard that body before reading the next request.
// - An HTTP/1.1 request without Host (RFC 9112 §3.2: 400): Node's own check is turned off
//   (`requireHostHeader: false`, which the server must be created with) and made here.
import { STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

const NOT_FOUND = Buffer.from(
  'HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n404 Not Found',
);

/** Node's reason phrase for `status` in sentence case under `error`, as the body of every answer here. */
function errorJson(status: number): string {
  const reason = STATUS_CODES[status] ?? 'Bad Request';
  return JSON.stringify({ error: reason[0] + reason.slice(1).toLowerCase() });
}

/** The JSON answer to a refused request: Node's status, its reason phrase in sentence case under `error`. */
export function clientErrorAnswer(status: number): Buffer {
  const body = errorJson(status);
  return Buffer.from(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Bad Request'}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
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

/** The same JSON answer through a response Node has made for a parsed request, closing the connection after it. */
function answerJson(res: ServerResponse, status: number): void {
  const body = errorJson(status);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}

/** The server's `checkExpectation` listener: 417 for any Expect but 100-continue (which Node answers with 100 and serves). */
export function answerExpectation(_req: IncomingMessage, res: ServerResponse): void {
  answerJson(res, 417);
}

/**
 * Serves `handler` on `server` (created with `requireHostHeader: false`) with the answers Node
 * would write itself in JSON: malformed requests, an unknown Expect, HTTP/1.1 without Host.
 */
export function answerInJson(server: Server, handler: RequestListener): void {
  server.on('clientError', answerClientError);
  server.on('checkExpectation', answerExpectation);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    // Node's own condition (lib/_http_server.js): HTTP/1.1 only; 1.0 has no Host requirement.
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) answerJson(res, 400);
    else void handler(req, res);
  });
}
