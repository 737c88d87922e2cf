// @intake/client against a real gateway, Redis and PostgreSQL: what it sends, what it retries
// (503 while Redis is cut, 429 after Retry-After, dropped connections, timed-out attempts) and
// what it never retries (409, 400), each checked in the database or the gateway's own metrics.
import net from 'node:net';
import test, { type ExecutionContext } from 'ava';
import { createClient, IntakeApiError, type ClientOptions, type RetryInfo } from '../../clients/typescript/src/index.ts';
import { callDigest } from '../../identify/call-digest.ts';
import { messageKeyOf } from '../../identify/identify-write.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { gatewayInProcess, harnessWithGateway, type InProcessGateway, workerInProcess } from '../helpers/processes.ts';
import { startFreezableProxy, startProxy } from '../helpers/proxy.ts';
import { newEnvironment, newTenant, openHarness, TEST_DATABASE_URL, TEST_REDIS_URL, type Harness } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;
harnessWithGateway(test, (...opened) => ([h, gateway] = opened));

/** A client whose retries are recorded; fast backoff so the tests stay short. */
function client(t: ExecutionContext, options: Partial<ClientOptions> & Pick<ClientOptions, 'orgSlug' | 'apiKey'>) {
  const retries: RetryInfo[] = [];
  const c = createClient({ baseUrl: gateway.url, retry: { baseDelayMs: 50, maxDelayMs: 400, maxAttempts: 40 }, onRetry: (r) => retries.push(r), ...options });
  t.teardown(() => c.close());
  return { c, retries };
}

/** A counter of the gateway's Prometheus text: requests of one route and status. */
async function requests(url: string, route: string, status: number): Promise<number> {
  const text = (await request(url, '/metrics', { method: 'GET' })).text;
  const line = text.split('\n').find((l) => l.startsWith('intake_http_requests_total{') && l.includes(`route="${route}"`) && l.includes(`status="${status}"`));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

test('identify, track and getProfile: key in X-Api-Key, the environment header, a messageId and a timestamp on every call', async (t) => {
  const tenant = await newTenant(h);
  const env = await newEnvironment(h, tenant);
  const { c, retries } = client(t, { orgSlug: env.pathValue, apiKey: env.key, environment: env.envKey });

  const before = Date.now();
  const identified = await c.identify({ userId: ' u-1 ', traits: { email: 'ann@example.com', plan: 'pro' } });
  t.regex(identified.messageId, /^[0-9a-f-]{36}$/, 'a generated UUID');
  t.false(identified.duplicate);
  t.is(identified.attempts, 1);
  const profile = await c.getProfile('u-1');
  t.like(profile, { org_slug: env.pathValue, user_id: 'u-1', fields: { email: 'ann@example.com', plan: 'pro' } });
  // The timestamp was taken at the call (not the service's receipt time, which is later).
  t.true(profile!.updated_at >= before && profile!.updated_at <= Date.now());
  const stored = await h.db.identifyMessage.findFirst({ where: { environmentId: env.environmentId } });
  t.is(stored?.messageKey, messageKeyOf(identified.messageId));
  const traits = { email: 'ann@example.com', plan: 'pro' };
  t.not(stored?.callDigest?.toString(), callDigest('u-1', null, traits), 'the call carried a timestamp');

  const tracked = await c.track({ userId: 'u-1', event: 'Signed Up', properties: { plan: 'pro' }, timestamp: new Date('2026-01-01T10:00:00Z') });
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const event = await eventually(() => h.db.event.findFirst({ where: { environmentId: env.environmentId, messageId: tracked.messageId } }));
  t.is(event?.event, 'Signed Up');
  t.is(event?.timestamp.toISOString(), '2026-01-01T10:00:00.000Z');

  t.is(await c.getProfile('nobody'), null, 'Profile not found is null');
  t.deepEqual(retries, []);
});

test('a 409 is not retried and carries the service error', async (t) => {
  const tenant = await newTenant(h);
  const { c, retries } = client(t, { orgSlug: tenant.slug, apiKey: tenant.key });
  const timestamp = '2026-01-01T10:00:00Z';
  await c.identify({ userId: 'u-1', traits: { a: 1 }, messageId: 'once', timestamp });
  t.true((await c.identify({ userId: 'u-1', traits: { a: 1 }, messageId: 'once', timestamp })).duplicate, 'same call: a duplicate');

  const conflicts = await requests(gateway.url, 'identify', 409);
  const err = await t.throwsAsync(c.identify({ userId: 'u-1', traits: { a: 2 }, messageId: 'once', timestamp }), { instanceOf: IntakeApiError });
  t.is(err.status, 409);
  t.is(err.error, 'messageId once was already used for a different call');
  t.is(err.attempts, 1);
  t.false(err.temporary);
  t.is((await requests(gateway.url, 'identify', 409)) - conflicts, 1, 'the gateway saw one 409, no resend');
  t.deepEqual(retries, []);
  t.deepEqual((await c.getProfile('u-1'))?.fields, { a: 1 });
});

test('a 400 is not retried and surfaces the Identify issues', async (t) => {
  const tenant = await newTenant(h);
  const { c, retries } = client(t, { orgSlug: tenant.slug, apiKey: tenant.key });
  const err = await t.throwsAsync(c.identify({ userId: '  ', consent: [{ channel: 'sms', status: 'granted', purpose: 'tracking' }] }), {
    instanceOf: IntakeApiError,
  });
  t.is(err.status, 400);
  t.is(err.error, 'Invalid Identify call');
  t.is(err.attempts, 1);
  t.deepEqual(
    err.issues?.map((i) => [i.path.join('.'), i.message]),
    [
      ['userId', 'String must contain at least 1 character(s)'],
      ['consent.0.channel', 'tracking consent applies to the email channel only'],
    ],
  );
  const track = await t.throwsAsync(c.track({ event: 'Signed Up' }), { instanceOf: IntakeApiError });
  t.deepEqual([track.status, track.error, track.issues, track.attempts], [400, 'At least one of userId or anonymousId is required', undefined, 1]);
  const bad = createClient({ baseUrl: gateway.url, orgSlug: tenant.slug, apiKey: 'itk_wrong' });
  t.teardown(() => bad.close());
  const unauthorized = await t.throwsAsync(bad.getProfile('u-1'), { instanceOf: IntakeApiError });
  t.deepEqual([unauthorized.status, unauthorized.error, unauthorized.attempts], [401, 'Invalid API key', 1]);
  t.deepEqual(retries, []);
});

test('Redis cut mid-stream: the 503s are retried with the same messageId, and every event is stored exactly once', async (t) => {
  const proxy = await startProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  const gh = await openHarness({ REDIS_URL: proxy.url(TEST_REDIS_URL), ENQUEUE_TIMEOUT_MS: '500' });
  t.teardown(() => gh.close());
  const direct = await openHarness({ QUEUE_PREFIX: gh.env.QUEUE_PREFIX });
  t.teardown(() => direct.close());
  const tenant = await newTenant(direct);
  const cutGateway = await gatewayInProcess(gh);
  t.teardown(() => cutGateway.close());
  const { c, retries } = client(t, { baseUrl: cutGateway.url, orgSlug: tenant.slug, apiKey: tenant.key });

  const sent: string[] = [];
  const stream = (async () => {
    for (let i = 0; i < 60; i++) {
      const r = await c.track({ userId: `u-${i}`, event: 'Streamed', properties: { i } });
      sent.push(r.messageId);
      await sleep(20);
    }
  })();
  await eventually(async () => sent.length >= 15, { timeoutMs: 10_000, intervalMs: 10 });
  proxy.cut();
  await sleep(2000);
  proxy.restore();
  await stream;

  const unavailable = retries.filter((r) => r.status === 503);
  t.true(unavailable.length > 0, 'some calls were answered 503 and retried');
  t.log(`${unavailable.length} retries after 503, ${sent.length} events`);
  const worker = await workerInProcess(direct);
  t.teardown(() => worker.close());
  t.true(await eventually(async () => (await direct.db.event.count({ where: { environmentId: tenant.environmentId } })) >= 60, { timeoutMs: 30_000 }));
  await sleep(300);
  const rows = await direct.db.event.findMany({ where: { environmentId: tenant.environmentId } });
  t.is(rows.length, 60, 'no event doubled');
  t.deepEqual(rows.map((r) => r.messageId).sort(), [...sent].sort(), 'each stored once, with the messageId of its call');
});

test('429: the retry waits at least Retry-After, then succeeds', async (t) => {
  // One body at a time for the environment, and no body cut while the test holds one.
  const gh = await openHarness({ MAX_UPLOADS_PER_ENVIRONMENT: '1', BODY_TIMEOUT_MS: '60000' });
  t.teardown(() => gh.close());
  const tenant = await newTenant(gh);
  const small = await gatewayInProcess(gh);
  t.teardown(() => small.close());
  const { c, retries } = client(t, { baseUrl: small.url, orgSlug: tenant.slug, apiKey: tenant.key });
  await c.identify({ userId: 'u-0', traits: { warm: true } });

  // The environment's one upload slot is held by a Track request whose body is still on its way.
  const { port } = new URL(small.url);
  const slow = net.connect(Number(port), '127.0.0.1');
  t.teardown(() => slow.destroy());
  const body = JSON.stringify({ type: 'track', messageId: 'slow', event: 'Slow', userId: 'u', timestamp: '2026-01-01T00:00:00Z' });
  slow.write(
    `POST /api/track/${tenant.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
  );
  // Held once the gateway has checked its key (on a loaded machine that can take a while).
  const uploads = async () => /^intake_http_uploads_in_progress 1$/m.test((await request(small.url, '/metrics', { method: 'GET' })).text);
  t.true(await eventually(uploads, { timeoutMs: 10_000, intervalMs: 20 }), 'the slow upload holds the slot');
  setTimeout(() => slow.end(body.slice(10)), 300);

  const started = Date.now();
  const result = await c.identify({ userId: 'u-1', traits: { a: 1 } });
  const elapsed = Date.now() - started;
  t.false(result.duplicate);
  t.true(result.attempts >= 2);
  t.is(retries[0]?.status, 429);
  t.true(retries[0].delayMs >= 1000, `waited ${retries[0].delayMs} ms`);
  t.true(elapsed >= 1000, `answered after ${elapsed} ms`);
});

test('dropped connections and timed-out attempts are retried; the profile gets each call once', async (t) => {
  const tenant = await newTenant(h);
  // Through a proxy the test can cut: connections drop mid-stream.
  const proxy = await startProxy(gateway.url);
  t.teardown(() => proxy.close());
  const { c, retries } = client(t, { baseUrl: proxy.url(gateway.url).replace(/\/$/, ''), orgSlug: tenant.slug, apiKey: tenant.key });
  const results: { userId: string; duplicate: boolean }[] = [];
  const stream = Promise.all(
    Array.from({ length: 5 }, async (_, lane) => {
      for (let i = 0; i < 30; i++) {
        const userId = `u-${lane}-${i}`;
        const r = await c.identify({ userId, traits: { lane, i } });
        results.push({ userId, duplicate: r.duplicate });
      }
    }),
  );
  await eventually(async () => results.length >= 20, { timeoutMs: 10_000, intervalMs: 5 });
  proxy.cut();
  await sleep(300);
  proxy.restore();
  await stream;
  t.true(
    retries.some((r) => r.code !== undefined),
    `connection errors were retried: ${[...new Set(retries.map((r) => r.code))].join(', ')}`,
  );
  t.is(results.length, 150);
  const rows = await h.db.identifyMessage.count({ where: { environmentId: tenant.environmentId } });
  t.is(rows, 150, 'one remembered messageId per call');
  for (const { userId } of results.filter((_, i) => i % 10 === 0)) {
    const [lane, i] = userId.split('-').slice(1).map(Number);
    t.deepEqual((await c.getProfile(userId))?.fields, { lane, i });
  }

  // A gateway whose PostgreSQL hangs: attempts time out and are retried until it answers.
  const pg = await startFreezableProxy(TEST_DATABASE_URL);
  t.teardown(() => pg.close());
  const ph = await openHarness({ DATABASE_URL: pg.url(TEST_DATABASE_URL) });
  t.teardown(() => ph.close());
  const hung = await gatewayInProcess(ph);
  t.teardown(() => hung.close());
  const slow = client(t, { baseUrl: hung.url, orgSlug: tenant.slug, apiKey: tenant.key, timeoutMs: 300 });
  await slow.c.identify({ userId: 'w', traits: { warm: true } });
  pg.freeze();
  setTimeout(() => pg.restore(), 1000);
  const r = await slow.c.identify({ userId: 'late', traits: { once: true } });
  t.true(
    slow.retries.some((x) => x.code === 'TIMEOUT'),
    'a timed-out attempt was retried',
  );
  t.true(r.attempts >= 2);
  t.deepEqual((await c.getProfile('late'))?.fields, { once: true });
});

test('connections are kept alive across calls', async (t) => {
  const tenant = await newTenant(h);
  let connections = 0;
  const { port } = new URL(gateway.url);
  const counter = net.createServer((socket) => {
    connections++;
    const upstream = net.connect(Number(port), '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });
  await new Promise<void>((resolve) => counter.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => counter.close(() => resolve())));
  const { c } = client(t, { baseUrl: `http://127.0.0.1:${(counter.address() as net.AddressInfo).port}`, orgSlug: tenant.slug, apiKey: tenant.key });
  for (let i = 0; i < 20; i++) await c.identify({ userId: `k-${i}`, traits: { i } });
  c.close();
  t.is(connections, 1);
});
