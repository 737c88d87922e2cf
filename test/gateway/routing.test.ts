// Route matching over HTTP: every unmatched path or method is the plain-text 404, the
// service sends no CORS headers on any response, and the health probes answer.
import net from 'node:net';
import test from 'ava';
import type { ExecutionContext } from 'ava';
import { MESSAGES, NOT_FOUND_TEXT } from '../../gateway/errors.ts';
import { TRACK_MESSAGES } from '../../events/track.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { harnessWithGateway, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, type Harness } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

harnessWithGateway(test, (...opened) => ([h, gateway] = opened));

function assertPlainNotFound(t: ExecutionContext, reply: Reply): void {
  t.is(reply.status, 404);
  t.is(reply.text, NOT_FOUND_TEXT);
  t.regex(reply.headers.get('content-type') ?? '', /^text\/plain\b/);
}

function assertNoCors(t: ExecutionContext, reply: Reply): void {
  const cors = [...reply.headers.keys()].filter((name) => name.toLowerCase().startsWith('access-control-'));
  t.deepEqual(cors, []);
}

interface Probe {
  method: string;
  /** Built from a fresh tenant's slug, so the route would be the real one apart from the variation. */
  path: (slug: string) => string;
  headers?: Record<string, string>;
  /** Send a valid Track body (so a 404 cannot come from a body problem). */
  body?: boolean;
}

const notFound = test.macro({
  async exec(t, probe: Probe) {
    const tenant = await newTenant(h);
    const reply = await request(gateway.url, probe.path(tenant.slug), {
      method: probe.method,
      headers: { 'x-api-key': tenant.key, ...probe.headers },
      body: probe.body ? trackBody() : undefined,
    });
    assertPlainNotFound(t, reply);
    assertNoCors(t, reply);
  },
  title: (provided = '', probe: Probe) => `${probe.method} ${provided} -> plain-text 404`,
});

test('unknown path', notFound, { method: 'POST', path: (s) => `/api/events/${s}`, body: true });
test('unknown root path', notFound, { method: 'GET', path: () => '/' });
test('trailing slash on Track', notFound, { method: 'POST', path: (s) => `/api/track/${s}/`, body: true });
test('Track with GET', notFound, { method: 'GET', path: (s) => `/api/track/${s}` });
test('Track with PUT', notFound, { method: 'PUT', path: (s) => `/api/track/${s}`, body: true });
test('Track with DELETE', notFound, { method: 'DELETE', path: (s) => `/api/track/${s}` });
test('Track with PATCH', notFound, { method: 'PATCH', path: (s) => `/api/track/${s}`, body: true });
test('preflight on Track', notFound, {
  method: 'OPTIONS',
  path: (s) => `/api/track/${s}`,
  headers: { origin: 'https://app.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, x-api-key' },
});
test('uppercase path', notFound, { method: 'POST', path: () => '/API/track/x', body: true });
test('uppercase segment', notFound, { method: 'POST', path: (s) => `/api/Track/${s}`, body: true });
test('Track without a slug', notFound, { method: 'POST', path: () => '/api/track', body: true });
test('Track with an empty slug', notFound, { method: 'POST', path: () => '/api/track/', body: true });
test('Track with an extra segment', notFound, { method: 'POST', path: (s) => `/api/track/${s}/more`, body: true });
test('Profiles with an empty user id', notFound, { method: 'GET', path: (s) => `/api/profiles/${s}/` });
test('healthz with POST', notFound, { method: 'POST', path: () => '/healthz', body: true });

test('the plain-text 404 does not depend on credentials', async (t) => {
  const reply = await request(gateway.url, '/api/track/acme/', { method: 'POST', body: trackBody() });
  assertPlainNotFound(t, reply);
});

const noCors = test.macro({
  async exec(t, variant: 'accepted' | 'invalid body' | 'missing key', expected: { status: number; error?: string }) {
    const tenant = await newTenant(h);
    const headers: Record<string, string> = { origin: 'https://app.example.com' };
    if (variant !== 'missing key') headers['x-api-key'] = tenant.key;
    const body = variant === 'invalid body' ? trackBody({ type: 'identify' }) : trackBody();
    const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers, body });
    t.is(reply.status, expected.status);
    if (expected.error !== undefined) t.deepEqual(reply.json, { error: expected.error });
    assertNoCors(t, reply);
  },
  title: (provided = '', variant: string, expected: { status: number }) => `no CORS headers on a ${expected.status} (${variant})${provided}`,
});

test(noCors, 'accepted', { status: 202 });
test(noCors, 'invalid body', { status: 400, error: TRACK_MESSAGES.invalidType });
test(noCors, 'missing key', { status: 401, error: MESSAGES.missingApiKey });

test('/healthz answers 200', async (t) => {
  const reply = await request(gateway.url, '/healthz', { method: 'GET' });
  t.is(reply.status, 200);
  t.deepEqual(reply.json, { status: 'ok' });
  assertNoCors(t, reply);
});

test('/readyz answers 200 with PostgreSQL and Redis up', async (t) => {
  // The gateway starts without waiting for Redis, so it may report itself not ready for a moment.
  const reply = await eventually(
    async () => {
      const r = await request(gateway.url, '/readyz', { method: 'GET' });
      return r.status === 200 ? r : null;
    },
    { timeoutMs: 5000 },
  );
  if (!reply) return t.fail('/readyz never answered 200 within 5 s');
  t.is(reply.status, 200);
  t.is(reply.json.status, 'ready');
  t.is(reply.json.postgres, true);
  t.is(reply.json.redis, true);
  assertNoCors(t, reply);
});

/** One request on a raw socket whose sending side is closed right after it; the status line that came back. */
function halfClosed(path: string, headers: Record<string, string>, method = 'GET', body = ''): Promise<string> {
  const { port } = new URL(gateway.url);
  return new Promise((resolve) => {
    const lines = Object.entries({ host: 'intake', 'content-length': String(Buffer.byteLength(body)), ...headers }).map(([k, v]) => `${k}: ${v}\r\n`);
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.end(`${method} ${path} HTTP/1.1\r\n${lines.join('')}\r\n${body}`));
    let received = '';
    socket.on('data', (chunk) => (received += chunk.toString()));
    socket.on('error', () => {});
    socket.on('close', () => resolve(received.split('\r\n')[0]));
  });
}

test('a client that closes its sending side after the request still gets the answer', async (t) => {
  const tenant = await newTenant(h);
  const headers = { 'x-api-key': tenant.key, 'content-type': 'application/json' };
  const identify = JSON.stringify({ userId: 'half', traits: { plan: 'pro' } });
  t.is(await halfClosed(`/api/identify/${tenant.slug}`, headers, 'POST', identify), 'HTTP/1.1 200 OK');
  t.is(await halfClosed(`/api/profiles/${tenant.slug}/half`, headers), 'HTTP/1.1 200 OK');
  t.is(await halfClosed(`/api/track/${tenant.slug}`, headers, 'POST', JSON.stringify(trackBody())), 'HTTP/1.1 202 Accepted');
});
