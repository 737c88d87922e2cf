// Requests Node's HTTP server refuses or answers itself never reach Koa (a parse error, an
// Expect other than 100-continue, HTTP/1.1 without Host); the gateway (and the dashboard) still
// answer them with the contract's shape, a JSON `error`, and close the connection. Raw
// sockets, since no HTTP client will send these. `Expect: 100-continue` is still served.
import http from 'node:http';
import test, { type ExecutionContext } from 'ava';
import { createDb } from '../../common/db.ts';
import { createLogger } from '../../common/logger.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import { rawExchange, request, trackBody } from '../helpers/http.ts';
import { harnessWithGateway, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, testConfig, testEnv, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;
let tenant: Tenant;

harnessWithGateway(test, async (...opened) => {
  [h, gateway] = opened;
  tenant = await newTenant(h);
});

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
