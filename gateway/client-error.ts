// Answers Node's HTTP server would write itself, before or instead of any middleware. Node
// would answer each with a bare status line and no body, but the contract makes every response
// JSON except the plain-text 404.
// - Requests its parser refuses ('clientError'). A request line whose target holds bytes a URL
//   cannot (unencoded non-ASCII, control characters) or whose method is no HTTP method names
//   nothing the spec serves, so it gets the spec's answer for that: the plain-text 404. Every
//   other parse error keeps Node's status with a JSON `error` (docs/decisions.md, "Requests Node's HTTP parser refuses"), and the
//   connection is closed: after a framing error nothing more on it can be read reliably.
// - An Expect other than exactly 100-continue ('checkContinue', 'checkExpectation'): 417 with a
//   JSON `error`, and the connection closed, since the client may hold its body back waiting for
//   a 100 that will not come, and Node would wait to discard that body before reading the next
//   request. Node's own test finds 100-continue anywhere in a list, which would serve a request
//   whose other expectations nobody meets.
// - An HTTP/1.1 request without Host (RFC 9112 §3.2: 400): Node's own check is turned off
//   (`requireHostHeader: false`, which the server must be created with) and made here.
// - CONNECT ('connect'): names no resource the spec serves, so the plain-text 404; Node would
//   close without a word.
// Answers go in request order (RFC 9112 §9.3.2). Node keeps a pipelined request's response
// queued until the ones ahead of it have finished, but hands the request over at once; a
// handler started then would act on a request whose answer may never be written (the
// connection closed by an answer ahead of it), so a queued request is handled only when its
// turn comes. A refusal, whose request has no response of its own to queue behind, waits for
// the responses ahead of it before it is written and the connection closed.
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

/** Set on a connection once its last answer is decided. */
const closing = Symbol('closing');
/** Set on a request the parser refused partway (its headers read, its body not). */
const refused = Symbol('refused');

/** What is read here of Node's connection socket (lib/_http_server.js). */
type Connection = Duplex & {
  /** The response being written: the first unfinished one of the connection (Node queues the others). */
  _httpMessage?: ServerResponse | null;
  /** The request being parsed, until it has been read to its end (null once the parser is freed). */
  parser?: { incoming?: IncomingMessage | null } | null;
  [closing]?: true;
};
type Request = IncomingMessage & { [refused]?: true };

/**
 * Writes `answer` once every response ahead of it on the connection has finished, then closes.
 * `refusedRequest`: the request the answer stands for, when Node made a response for it; that
 * response is replaced by `answer` unless it has begun, in which case it is that request's
 * answer and nothing follows it.
 */
function closeInTurn(socket: Connection, answer: Buffer | null, refusedRequest: IncomingMessage | null): void {
  const current = socket._httpMessage;
  // A socket no longer writable (reset by the client, or ended) delivers nothing more: close it now.
  if (current && socket.writable && !(current.req === refusedRequest && !current.headersSent)) {
    // Node's resOnFinish listener was added first, so this one finds the next response already
    // assigned (or none, or the socket closing after a Connection: close answer).
    current.once('finish', () => closeInTurn(socket, current.req === refusedRequest ? null : answer, refusedRequest));
    return;
  }
  if (answer && socket.writable) socket.write(answer);
  socket.destroy();
}

/** The server's `clientError` listener: what Node does by default, with the answers above, after the answers ahead. */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  const connection = socket as Connection;
  // The parser stays in error and reports it again for every later chunk or timeout.
  if (connection[closing]) return;
  connection[closing] = true;
  const incoming = connection.parser?.incoming;
  const refusedRequest = incoming && !incoming.complete ? incoming : null;
  if (refusedRequest) (refusedRequest as Request)[refused] = true;
  // Nothing after the error can be parsed; the responses ahead need no more input.
  if (connection._httpMessage) connection.pause();
  closeInTurn(connection, ANSWERS[err.code ?? ''] ?? BAD_REQUEST, refusedRequest);
}

/** The server's `connect` listener: Node hands the socket over, detached from the server, with any earlier response still in flight. */
function answerConnect(_req: IncomingMessage, socket: Duplex): void {
  // Node has removed its own error listener from the socket.
  socket.on('error', () => {});
  socket.pause();
  closeInTurn(socket as Connection, NOT_FOUND, null);
}

/** The same JSON answer through a response Node has made for a parsed request, closing the connection after it. */
function answerJson(res: ServerResponse, status: number): void {
  const body = errorJson(status);
  res.writeHead(status, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
  res.end(body);
}

/** Node's own Host condition (lib/_http_server.js): HTTP/1.1 only; 1.0 has no Host requirement. */
function lacksHost(req: IncomingMessage): boolean {
  return req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1;
}

// RFC 9110 §10.1.1: the member is case-insensitive. Node has already trimmed the field value.
const CONTINUE_ONLY = /^\s*100-continue\s*$/i;

/**
 * `serve` for a request once its turn has come: at once when its response owns the socket,
 * else when Node assigns it (after every response ahead has finished), and never when the
 * connection closes first or the parser refused the request meanwhile.
 */
function inTurn(serve: (req: IncomingMessage, res: ServerResponse) => void) {
  return (req: IncomingMessage, res: ServerResponse) => {
    if (res.socket) serve(req, res);
    else
      res.once('socket', () => {
        if (!(req as Request)[refused]) serve(req, res);
      });
  };
}

/**
 * Serves `handler` on `server` (created with `requireHostHeader: false`) with the answers Node
 * would write itself in JSON: malformed requests, an unknown Expect, HTTP/1.1 without Host,
 * CONNECT; every request in its turn on its connection.
 */
export function answerInJson(server: Server, handler: RequestListener): void {
  server.on('clientError', answerClientError);
  server.on('connect', answerConnect);
  // Node emits these two instead of 'request' for an HTTP/1.1 request with Expect (it ignores Expect in 1.0).
  server.on(
    'checkContinue',
    inTurn((req, res) => {
      if (lacksHost(req)) answerJson(res, 400);
      else if (!CONTINUE_ONLY.test(req.headers.expect ?? '')) answerJson(res, 417);
      else {
        res.writeContinue();
        void handler(req, res);
      }
    }),
  );
  server.on(
    'checkExpectation',
    inTurn((req, res) => answerJson(res, lacksHost(req) ? 400 : 417)),
  );
  server.on(
    'request',
    inTurn((req, res) => {
      if (lacksHost(req)) answerJson(res, 400);
      else void handler(req, res);
    }),
  );
}
