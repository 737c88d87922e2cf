// Nothing internal reaches a caller: whatever goes wrong (malformed or hostile bodies, a
// dependency cut), the body is exactly one of the spec's, never a stack trace, an exception
// message, a query or a library name, and the headers are the plain HTTP ones. No response,
// preflight included, carries a CORS header.
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { gatewayInProcess, harnessWithGatewayAndTenant, type InProcessGateway } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL, TEST_REDIS_URL, type Harness, type Tenant } from '../helpers/services.ts';

/** Words and shapes that only an internal error would put in a response. */
const INTERNALS =
  /\bat [\w.<>]+ \(|\.ts:\d+|\.js:\d+|node_modules|file:\/\/|Error:|Exception|stack|prisma|postgres|ioredis|bullmq|ECONN|ETIMEDOUT|SELECT |INSERT |syntax error|Unexpected token|JSON at position|koa/i;
/** Every header the gateway may send. */
const HEADERS = new Set(['content-type', 'content-length', 'date', 'connection', 'keep-alive', 'x-request-id', 'retry-after', 'transfer-encoding']);

function clean(t: ExecutionContext, what: string, reply: Reply) {
  t.notRegex(reply.text, INTERNALS, `${what}: ${reply.status} ${reply.text.slice(0, 200)}`);
  const extra = [...reply.headers.keys()].filter((name) => !HEADERS.has(name));
  t.deepEqual(extra, [], `${what}: unexpected headers`);
}

let h: Harness;
let gateway: InProcessGateway;
let tenant: Tenant;

harnessWithGatewayAndTenant(test, (...opened) => ([h, gateway, tenant] = opened));

const deep = (depth: number, open: string, close: string, inner = '1') => open.repeat(depth) + inner + close.repeat(depth);

test('hostile and malformed bodies get a spec body and nothing internal', async (t) => {
  const auth = { 'x-api-key': tenant.key };
  const bodies: [string, string | Buffer][] = [
    ['truncated JSON', '{"type":"track","messageId":'],
    ['not JSON', 'hello'],
    ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])],
    ['a __proto__ key', '{"__proto__":{"isAdmin":true},"constructor":{"prototype":{"x":1}}}'],
    ['deep arrays', deep(20_000, '[', ']')],
    ['deep objects', '{"type":"track","properties":' + deep(20_000, '{"a":', '}') + '}'],
    ['a number too large', '{"type":"track","messageId":1e400}'],
    ['NUL bytes', '{"type":"track","messageId":"\\u0000","event":"\\u0000","userId":"\\u0000","timestamp":"2024-05-01T10:00:00Z"}'],
    ['an empty body', ''],
  ];
  for (const path of [`/api/track/${tenant.slug}`, `/api/identify/${tenant.slug}`]) {
    for (const [what, body] of bodies) {
      const reply = await request(gateway.url, path, { headers: auth, body });
      t.true(reply.status < 500, `${path} ${what}: ${reply.status} ${reply.text.slice(0, 200)}`);
      t.true(typeof reply.json?.error === 'string' || reply.status < 300, `${path} ${what}: ${reply.text.slice(0, 200)}`);
      clean(t, `${path} ${what}`, reply);
    }
  }
  // Over the raw body limits: the spec's 413 bodies, read no further.
  const big = 'x'.repeat(6 * 1024 * 1024);
  const track413 = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: auth, body: `{"a":"${big}"}` });
  t.is(track413.text, '{"error":"Track event is too large"}');
  clean(t, 'Track over its raw limit', track413);
  const identify413 = await request(gateway.url, `/api/identify/${tenant.slug}`, { headers: auth, body: `{"a":"${big}"}` });
  t.is(identify413.status, 413);
  clean(t, 'Identify over its memory guard', identify413);
});

test('with PostgreSQL or Redis cut, the answers are exactly the spec bodies', async (t) => {
  const pg = await startProxy(TEST_DATABASE_URL);
  t.teardown(() => pg.close());
  const redis = await startProxy(TEST_REDIS_URL);
  t.teardown(() => redis.close());
  const gh = await openHarness({
    DATABASE_URL: pg.url(TEST_DATABASE_URL),
    REDIS_URL: redis.url(TEST_REDIS_URL),
    QUEUE_PREFIX: h.env.QUEUE_PREFIX,
    ENQUEUE_TIMEOUT_MS: '500',
  });
  t.teardown(() => gh.close());
  const faulty = await gatewayInProcess(gh);
  t.teardown(() => faulty.close());
  const cached = await newTenant(h);
  const auth = { 'x-api-key': cached.key };
  // Warm the key cache while PostgreSQL is up.
  t.is((await request(faulty.url, `/api/track/${cached.slug}`, { headers: auth, body: trackBody() })).status, 202);

  pg.cut();
  const uncached = await newTenant(h);
  const internal = '{"error":"Internal error"}';
  const pgDown: [string, Reply][] = [
    ['Identify', await request(faulty.url, `/api/identify/${cached.slug}`, { headers: auth, body: { userId: 'u', traits: { a: 1 } }, timeoutMs: 20_000 })],
    ['Profiles', await request(faulty.url, `/api/profiles/${cached.slug}/u`, { method: 'GET', headers: auth, timeoutMs: 20_000 })],
    [
      'a key lookup',
      await request(faulty.url, `/api/track/${uncached.slug}`, { headers: { 'x-api-key': uncached.key }, body: trackBody(), timeoutMs: 20_000 }),
    ],
  ];
  for (const [what, reply] of pgDown) {
    t.is(reply.status, 500, what);
    t.is(reply.text, internal, what);
    clean(t, `${what} with PostgreSQL cut`, reply);
  }
  pg.restore();

  redis.cut();
  const trackDown = await request(faulty.url, `/api/track/${cached.slug}`, { headers: auth, body: trackBody(), timeoutMs: 20_000 });
  t.is(trackDown.status, 503);
  t.is(trackDown.text, '{"error":"Event storage is unavailable"}');
  clean(t, 'Track with Redis cut', trackDown);
  redis.restore();
});

test('no response carries a CORS header, preflights included; a preflight is the plain-text 404', async (t) => {
  const origin = { origin: 'https://app.example.com' };
  const preflight = {
    ...origin,
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'content-type, x-api-key, authorization, x-service-environment',
  };
  const paths = [
    `/api/track/${tenant.slug}`,
    `/api/identify/${tenant.slug}`,
    `/api/profiles/${tenant.slug}/u`,
    '/healthz',
    '/readyz',
    '/metrics',
    '/',
    '/api/unknown',
  ];
  const replies: [string, Reply][] = [];
  for (const path of paths) {
    const reply = await request(gateway.url, path, { method: 'OPTIONS', headers: preflight });
    t.is(reply.status, 404, `OPTIONS ${path}`);
    t.is(reply.text, '404 Not Found', `OPTIONS ${path}`);
    replies.push([`OPTIONS ${path}`, reply]);
  }
  const auth = { ...origin, 'x-api-key': tenant.key };
  replies.push(
    ['Track 202', await request(gateway.url, `/api/track/${tenant.slug}`, { headers: auth, body: trackBody() })],
    ['Track 400', await request(gateway.url, `/api/track/${tenant.slug}`, { headers: auth, body: '{' })],
    ['Track 401', await request(gateway.url, `/api/track/${tenant.slug}`, { headers: origin, body: trackBody() })],
    ['Identify 200', await request(gateway.url, `/api/identify/${tenant.slug}`, { headers: auth, body: { userId: 'u', traits: { a: 1 } } })],
    ['Profiles 200', await request(gateway.url, `/api/profiles/${tenant.slug}/u`, { method: 'GET', headers: auth })],
    ['Profiles 404', await request(gateway.url, `/api/profiles/${tenant.slug}/nobody`, { method: 'GET', headers: auth })],
    ['healthz', await request(gateway.url, '/healthz', { method: 'GET', headers: origin })],
    ['metrics', await request(gateway.url, '/metrics', { method: 'GET', headers: origin })],
  );
  for (const [what, reply] of replies) {
    const cors = [...reply.headers.keys()].filter((name) => name.startsWith('access-control-') || name === 'vary');
    t.deepEqual(cors, [], what);
  }
});

/** Sends raw bytes on a new connection; resolves with everything the server wrote back. */
function rawExchange(url: string, bytes: Buffer): Promise<string> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    let out = '';
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(bytes));
    socket.on('data', (chunk: Buffer) => (out += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve(out));
    setTimeout(() => socket.destroy(), 5000).unref();
  });
}

test('requests the HTTP parser refuses: an unencoded target or an unknown method is the plain-text 404', async (t) => {
  const head = (requestLine: string, extra = '') =>
    Buffer.from(`${requestLine}\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\n${extra}Content-Length: 2\r\n\r\n{}`, 'latin1');
  const notFound = /^HTTP\/1\.1 404 Not Found\r\nContent-Type: text\/plain; charset=utf-8\r\nContent-Length: 13\r\nConnection: close\r\n\r\n404 Not Found$/;
  t.regex(await rawExchange(gateway.url, head(`GET /api/profiles/${tenant.slug}/J\xf6rg HTTP/1.1`)), notFound);
  t.regex(await rawExchange(gateway.url, head(`POST /api/track/${tenant.slug}\x7f HTTP/1.1`)), notFound);
  t.regex(await rawExchange(gateway.url, head(`FETCH /api/track/${tenant.slug} HTTP/1.1`)), notFound);
  // Other malformed HTTP keeps Node's status, with a JSON error (test/gateway/malformed-http.test.ts).
  t.regex(await rawExchange(gateway.url, head(`POST /api/track/${tenant.slug} HTTP/1.1`, `X-Big: ${'a'.repeat(1_100_000)}\r\n`)), /^HTTP\/1\.1 431 /);
  t.regex(await rawExchange(gateway.url, head(`POST /api/track/${tenant.slug} HTTP/1.1`, 'Bad Header: x\r\n')), /^HTTP\/1\.1 400 Bad Request\r\n/);
  // The gateway still answers.
  t.is((await request(gateway.url, '/healthz', { method: 'GET' })).status, 200);
});
