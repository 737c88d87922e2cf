// Requests Node's HTTP server refuses or answers itself never reach Koa (a parse error, an
// Expect other than 100-continue, HTTP/1.1 without Host); the gateway (and the dashboard) still
// answer them with the contract's shape, a JSON `error`, and close the connection. Raw
// sockets, since no HTTP client will send these. `Expect: 100-continue` is still served.
// Requests pipelined in one write are answered in their order, and one whose answer is not
// delivered (behind a refused request or a closing answer) is not handled at all.
import http from 'node:http';
import test, { type ExecutionContext } from 'ava';
import { eventsGet } from '../../cli/commands/events.ts';
import { OperatorError } from '../../operations/operator.ts';
import { createDb } from '../../platform/db.ts';
import { createLogger } from '../../platform/logger.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import { acceptedTrack, parseAnswers, rawExchange, request, trackBody, type RawAnswer } from '../helpers/http.ts';
import { harnessWithGatewayAndTenant, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, testConfig, testEnv, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;
let tenant: Tenant;

harnessWithGatewayAndTenant(test, (...opened) => ([h, gateway, tenant] = opened));

function parseAnswer(received: string) {
  const [head, body = ''] = received.split('\r\n\r\n');
  const [statusLine, ...headerLines] = head.split('\r\n');
  const headers = Object.fromEntries(headerLines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine.split(' ')[1]), headers, body };
}

const slug = () => tenant.slug;
const CASES: [string, () => string, number, string][] = [
  ['a bad chunk size', () => `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`, 400, 'Bad request'],
  [
    'Transfer-Encoding together with Content-Length',
    () => `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 7\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    400,
    'Bad request',
  ],
  ['two Content-Lengths', () => `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}`, 400, 'Bad request'],
  [
    'a header past HTTP_MAX_HEADER_BYTES (1 MiB; the issue saw 64 KB refused with an empty body)',
    () => `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(1_100_000)}\r\nContent-Length: 2\r\n\r\n{}`,
    431,
    'Request header fields too large',
  ],
  [
    'an Expect other than 100-continue',
    () => `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nExpect: foo\r\nContent-Length: 2\r\n\r\n{}`,
    417,
    'Expectation failed',
  ],
  ['an HTTP/1.1 request without Host', () => `GET /api/profiles/${slug()}/u HTTP/1.1\r\n\r\n`, 400, 'Bad request'],
  [
    'a URL past HTTP_MAX_HEADER_BYTES',
    () => `GET /api/profiles/${slug()}/${'u'.repeat(1_100_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
    431,
    'Request header fields too large',
  ],
];

async function answersJsonAndCloses(t: ExecutionContext, url: string, what: string, bytes: string, status: number, error: string) {
  const { received, closedByServer } = await rawExchange(url, bytes);
  const answer = parseAnswer(received);
  t.is(answer.status, status, `${what}: ${received.slice(0, 200)}`);
  t.is(answer.headers['content-type'], 'application/json; charset=utf-8', what);
  t.is(answer.headers.connection, 'close', what);
  t.is(Number(answer.headers['content-length']), Buffer.byteLength(answer.body), what);
  t.deepEqual(JSON.parse(answer.body), { error }, what);
  t.true(closedByServer, `${what}: the server closes the connection`);
}

for (const [what, bytes, status, error] of CASES) {
  test(`gateway: ${what} answers ${status} with a JSON error and closes the connection`, async (t) => {
    await answersJsonAndCloses(t, gateway.url, what, bytes(), status, error);
  });
}

test('gateway: still serves after the malformed requests, and a well-formed raw request still works', async (t) => {
  await Promise.all(CASES.map(([, bytes]) => rawExchange(gateway.url, bytes())));
  const body = JSON.stringify(trackBody());
  const { received } = await rawExchange(
    gateway.url,
    `POST /api/track/${slug()} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
  );
  t.is(parseAnswer(received).status, 202, received);
  t.is((await request(gateway.url, '/healthz', { method: 'GET' })).status, 200);
});

test('dashboard: the same cases answer JSON errors and close the connection', async (t) => {
  const config = testConfig(testEnv({ DASHBOARD_PORT: '0' }));
  const db = createDb(config);
  const board = await startDashboard({ config, db, log: createLogger('silent', 'test-dashboard') });
  t.teardown(async () => {
    await board.close();
    await db.$disconnect();
  });
  const url = `http://127.0.0.1:${board.port}`;
  for (const [what, bytes, status, error] of CASES) await answersJsonAndCloses(t, url, what, bytes(), status, error);
  // In request order there too: the probe's own answer, then the refusal.
  const { received, closedByServer } = await rawExchange(
    url,
    'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n',
  );
  const { answers, rest } = parseAnswers(received);
  t.deepEqual(
    answers.map((a) => a.status),
    [200, 400],
    received,
  );
  t.is(answers[1]?.raw, BAD_REQUEST_BYTES);
  t.is(rest, '');
  t.true(closedByServer);
  const connect = await rawExchange(url, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
  t.is(connect.received, NOT_FOUND_BYTES);
});

test('gateway: Expect: 100-continue gets 100 Continue, then the body is read and answered; HTTP/1.0 without Host is served', async (t) => {
  const body = Buffer.from(JSON.stringify(trackBody()));
  const reply = await new Promise<{ continued: boolean; status: number; text: string }>((resolve, reject) => {
    let continued = false;
    const req = http.request({
      host: '127.0.0.1',
      port: new URL(gateway.url).port,
      method: 'POST',
      path: `/api/track/${slug()}`,
      agent: false,
      headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', 'content-length': body.length, expect: '100-continue' },
    });
    // The body goes only once the server asked for it.
    req.on('continue', () => ((continued = true), req.end(body)));
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ continued, status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.flushHeaders();
  });
  t.true(reply.continued, 'a 100 Continue came first');
  t.is(reply.status, 202, reply.text);
  const old = JSON.stringify(trackBody());
  const { received } = await rawExchange(
    gateway.url,
    `POST /api/track/${slug()} HTTP/1.0\r\nX-Api-Key: ${tenant.key}\r\nContent-Length: ${old.length}\r\n\r\n${old}`,
  );
  t.is(parseAnswer(received).status, 202, received);
});

// --- Pipelined requests: answers in request order, nothing handled whose answer is not sent ---

/** The exact bytes of the answers written for a refused request. */
const jsonErrorBytes = (status: number, reason: string, error: string) => {
  const body = JSON.stringify({ error });
  return `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`;
};
const BAD_REQUEST_BYTES = jsonErrorBytes(400, 'Bad Request', 'Bad request');
const NOT_FOUND_BYTES = 'HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n404 Not Found';

function trackRequest(tn: Tenant, body: Record<string, unknown>, headers = ''): string {
  const text = JSON.stringify(body);
  return `POST /api/track/${tn.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tn.key}\r\nContent-Type: application/json\r\n${headers}Content-Length: ${text.length}\r\n\r\n${text}`;
}

function identifyRequest(tn: Tenant, body: Record<string, unknown>): string {
  const text = JSON.stringify(body);
  return `POST /api/identify/${tn.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tn.key}\r\nContent-Type: application/json\r\nContent-Length: ${text.length}\r\n\r\n${text}`;
}

/** A valid request of either kind, the answer it must get, and a check that it was stored. */
const FIRST = {
  Track: (tn: Tenant) => {
    const body = trackBody();
    return {
      bytes: trackRequest(tn, body),
      answer: { status: 202, json: { message_id: body.messageId, status: 'accepted' } },
      stored: (t: ExecutionContext) => accepted(t, tn, body.messageId),
    };
  },
  Identify: (tn: Tenant) => {
    const body = { userId: 'u-1', messageId: `i-${Math.random().toString(36).slice(2)}`, timestamp: '2024-05-01T10:00:00Z', traits: { name: 'Ann' } };
    return {
      bytes: identifyRequest(tn, body),
      answer: { status: 200, json: { success: true, messageId: body.messageId, duplicate: false } },
      stored: async (t: ExecutionContext) => t.is(await h.db.profile.count({ where: { environmentId: tn.environmentId } }), 1),
    };
  },
};

/** Track requests Node's parser refuses; each carries a valid event (`body`), which must not be stored. */
const REFUSED: [string, (tn: Tenant, body: string) => string, string][] = [
  [
    'a bad chunk size',
    (tn, body) =>
      `POST /api/track/${tn.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tn.key}\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\nzz\r\n\r\n`,
    BAD_REQUEST_BYTES,
  ],
  [
    'Transfer-Encoding together with Content-Length',
    (tn, body) =>
      `POST /api/track/${tn.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tn.key}\r\nTransfer-Encoding: chunked\r\nContent-Length: ${body.length}\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    BAD_REQUEST_BYTES,
  ],
  [
    'two Content-Lengths',
    (tn, body) =>
      `POST /api/track/${tn.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tn.key}\r\nContent-Length: ${body.length}\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    BAD_REQUEST_BYTES,
  ],
  // No HTTP method: the plain-text 404, as for any request naming nothing the spec serves.
  ['a line that is no request', () => 'GARBAGE\r\n\r\n', NOT_FOUND_BYTES],
];

/** `intake events get` finds the event: queued (its 202 says so) or already stored. */
async function accepted(t: ExecutionContext, tn: Tenant, messageId: unknown): Promise<void> {
  const got = (await eventsGet(h.operator, [tn.slug, '--', String(messageId)])) as { messageId: string };
  t.is(got.messageId, String(messageId));
}

function isAnswer(t: ExecutionContext, answer: RawAnswer | undefined, expected: { status: number; json: unknown }, what: string): void {
  t.is(answer?.status, expected.status, `${what}: ${answer?.raw}`);
  t.deepEqual(answer && JSON.parse(answer.body), expected.json, what);
}

/**
 * None of `messageIds` was queued or stored. A Track accepted afterwards on another connection
 * comes first: a request handled before that one was read would have been queued by then.
 */
async function noneStored(t: ExecutionContext, tn: Tenant, ...messageIds: string[]): Promise<void> {
  await acceptedTrack(gateway.url, tn, {});
  for (const messageId of messageIds) {
    await t.throwsAsync(eventsGet(h.operator, [tn.slug, '--', messageId]), { instanceOf: OperatorError }, `${messageId} was stored`);
  }
}

for (const [firstKind, first] of Object.entries(FIRST)) {
  for (const [what, refused, errorBytes] of REFUSED) {
    test(`gateway: a valid ${firstKind}, then ${what}, in one write: the ${firstKind}'s own answer, then the refusal, then the close`, async (t) => {
      const tn = await newTenant(h);
      const valid = first(tn);
      const refusedBody = trackBody();
      const { received, closedByServer } = await rawExchange(gateway.url, valid.bytes + refused(tn, JSON.stringify(refusedBody)));
      const { answers, rest } = parseAnswers(received);
      t.is(answers.length, 2, received);
      isAnswer(t, answers[0], valid.answer, `the ${firstKind}`);
      t.is(answers[1]?.raw, errorBytes, 'the refusal, second');
      t.is(rest, '', 'nothing after the refusal');
      t.true(closedByServer, 'the server closes the connection');
      await valid.stored(t);
      await noneStored(t, tn, refusedBody.messageId as string);
    });
  }
}

test('gateway: a bad chunk size after a chunk holding a whole event, alone on its connection: 400, and the event is not stored', async (t) => {
  const tn = await newTenant(h);
  const body = trackBody();
  const { received, closedByServer } = await rawExchange(gateway.url, REFUSED[0][1](tn, JSON.stringify(body)));
  t.is(received, BAD_REQUEST_BYTES);
  t.true(closedByServer);
  await noneStored(t, tn, body.messageId as string);
});

test('gateway: two valid Tracks, then a refused request, in one write: both answers in order, each request handled in its turn, then the refusal', async (t) => {
  const tn = await newTenant(h);
  const [one, two] = [trackBody(), trackBody()];
  const { received, closedByServer } = await rawExchange(gateway.url, trackRequest(tn, one) + trackRequest(tn, two) + 'GARBAGE\r\n\r\n');
  const { answers, rest } = parseAnswers(received);
  t.is(answers.length, 3, received);
  isAnswer(t, answers[0], { status: 202, json: { message_id: one.messageId, status: 'accepted' } }, 'first');
  isAnswer(t, answers[1], { status: 202, json: { message_id: two.messageId, status: 'accepted' } }, 'second');
  t.is(answers[2]?.raw, NOT_FOUND_BYTES);
  t.is(rest, '');
  t.true(closedByServer);
  for (const body of [one, two]) await accepted(t, tn, body.messageId);
});

test('gateway: ten Tracks in one write get their ten 202s in request order', async (t) => {
  const tn = await newTenant(h);
  const bodies = Array.from({ length: 10 }, () => trackBody());
  const last = trackRequest(tn, bodies[9], 'Connection: close\r\n');
  const { received, closedByServer } = await rawExchange(
    gateway.url,
    bodies
      .slice(0, 9)
      .map((body) => trackRequest(tn, body))
      .join('') + last,
  );
  const { answers, rest } = parseAnswers(received);
  t.deepEqual(
    answers.map((a) => [a.status, JSON.parse(a.body).message_id]),
    bodies.map((body) => [202, body.messageId]),
    received,
  );
  t.is(rest, '');
  t.true(closedByServer);
});

test('gateway: valid, then Expect: foo, then valid, in one write: 202, 417, the close; neither request after the first is handled', async (t) => {
  const tn = await newTenant(h);
  const [one, two, three] = [trackBody(), trackBody(), trackBody()];
  const { received, closedByServer } = await rawExchange(
    gateway.url,
    trackRequest(tn, one) + trackRequest(tn, two, 'Expect: foo\r\n') + trackRequest(tn, three),
  );
  const { answers, rest } = parseAnswers(received);
  t.is(answers.length, 2, received);
  isAnswer(t, answers[0], { status: 202, json: { message_id: one.messageId, status: 'accepted' } }, 'first');
  isAnswer(t, answers[1], { status: 417, json: { error: 'Expectation failed' } }, 'second');
  t.is(answers[1]?.headers.connection, 'close');
  t.is(rest, '');
  t.true(closedByServer);
  await accepted(t, tn, one.messageId);
  await noneStored(t, tn, two.messageId as string, three.messageId as string);
});

test('gateway: Expect naming 100-continue among others gets 417 (no 100 Continue), and the request is not handled', async (t) => {
  const tn = await newTenant(h);
  for (const expect of ['100-continue, foo', 'foo, 100-continue', '100-continue;x=1']) {
    const body = trackBody();
    const { received, closedByServer } = await rawExchange(gateway.url, trackRequest(tn, body, `Expect: ${expect}\r\n`));
    const { answers, rest } = parseAnswers(received);
    t.is(answers.length, 1, `${expect}: ${received}`);
    isAnswer(t, answers[0], { status: 417, json: { error: 'Expectation failed' } }, expect);
    t.is(rest, '', expect);
    t.true(closedByServer, expect);
    await noneStored(t, tn, body.messageId as string);
  }
});

test('gateway: Expect: 100-continue in any case, with surrounding whitespace, gets 100 Continue, then the request is served', async (t) => {
  const tn = await newTenant(h);
  const body = trackBody();
  const { received } = await rawExchange(gateway.url, trackRequest(tn, body, 'Expect:  100-Continue \r\nConnection: close\r\n'));
  const { answers, rest } = parseAnswers(received);
  t.deepEqual(
    answers.map((a) => a.status),
    [100, 202],
    received,
  );
  t.is(answers[0]?.raw, 'HTTP/1.1 100 Continue\r\n\r\n');
  isAnswer(t, answers[1], { status: 202, json: { message_id: body.messageId, status: 'accepted' } }, 'the request');
  t.is(rest, '');
});

test('gateway: CONNECT gets the plain-text 404 and the close; behind a valid Track, after its 202', async (t) => {
  const connect = 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n';
  const alone = await rawExchange(gateway.url, connect);
  t.is(alone.received, NOT_FOUND_BYTES);
  t.true(alone.closedByServer);

  const tn = await newTenant(h);
  const body = trackBody();
  const { received, closedByServer } = await rawExchange(gateway.url, trackRequest(tn, body) + connect);
  const { answers, rest } = parseAnswers(received);
  t.is(answers.length, 2, received);
  isAnswer(t, answers[0], { status: 202, json: { message_id: body.messageId, status: 'accepted' } }, 'the Track');
  t.is(answers[1]?.raw, NOT_FOUND_BYTES);
  t.is(rest, '');
  t.true(closedByServer);
  await accepted(t, tn, body.messageId);
});
