// The in-flight bound (MAX_IN_FLIGHT): with every slot held by a request waiting on a hung
// Redis (one of each of two environments: one alone may hold only half, gateway/admission.ts),
// one more Identify, Track or Profiles request is refused at once with 429, the body
// {"error":"Too many requests"} and Retry-After; the key and environment checks still come
// first (a slot is taken once the environment is known), and route checks, health probes and
// /metrics are not limited. Once Redis answers, the held requests complete and everything
// answers normally. Per-environment parts and uploads: test/gateway/fairness.test.ts.
import test from 'ava';
import { queuedMessageIds } from '../helpers/batches.ts';
import { METRIC_NAMES } from '../../gateway/metrics/gateway-metrics.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startFreezableProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_REDIS_URL } from '../helpers/services.ts';
import { samples, series } from '../helpers/metrics.ts';

const MAX_IN_FLIGHT = 2;
/** A refusal must not wait on anything: well under the enqueue bound and the test's patience. */
const FAST_MS = 500;

const metric = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);

test('beyond MAX_IN_FLIGHT a request is refused at once with 429 and Retry-After; after release all answer normally', async (t) => {
  const proxy = await startFreezableProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  // The gateway reaches Redis through the proxy and waits long for an enqueue, so held requests stay held.
  const gh = await openHarness({ REDIS_URL: proxy.url(TEST_REDIS_URL), MAX_IN_FLIGHT: String(MAX_IN_FLIGHT), ENQUEUE_TIMEOUT_MS: '30000' });
  t.teardown(() => gh.close());
  const direct = await openHarness({ QUEUE_PREFIX: gh.env.QUEUE_PREFIX });
  t.teardown(() => direct.close());
  const tenant = await newTenant(direct);
  const other = await newTenant(direct);
  const gateway = await gatewayInProcess(gh);
  t.teardown(() => gateway.close());

  const auth = { 'x-api-key': tenant.key };
  const timed = async (path: string, options: Parameters<typeof request>[2]) => {
    const started = performance.now();
    const reply = await request(gateway.url, path, { timeoutMs: 40_000, ...options });
    return { ...reply, ms: performance.now() - started };
  };
  const track = (body = trackBody()) => timed(`/api/track/${tenant.slug}`, { headers: auth, body });
  const otherTrack = (body = trackBody()) => timed(`/api/track/${other.slug}`, { headers: { 'x-api-key': other.key }, body });
  const identify = () => timed(`/api/identify/${tenant.slug}`, { headers: auth, body: { userId: 'u-overload', traits: { plan: 'pro' } } });
  const profile = () => timed(`/api/profiles/${tenant.slug}/u-overload`, { method: 'GET', headers: auth });
  const scrape = async () => (await timed('/metrics', { method: 'GET' })).text;

  // Warm up (the keys are cached, the profile exists), then hang Redis under every slot.
  t.is((await track()).status, 202);
  t.is((await otherTrack()).status, 202);
  t.is((await identify()).status, 200);
  proxy.freeze();
  const held = [trackBody(), trackBody()];
  const heldReplies = Promise.all([track(held[0]), otherTrack(held[1])]);
  t.true(await eventually(async () => metric(await scrape(), METRIC_NAMES.inFlight) === MAX_IN_FLIGHT, { timeoutMs: 10_000 }), 'both slots held');

  const refused = (what: string, r: Reply & { ms: number }) => {
    t.is(r.status, 429, `${what}: ${r.text}`);
    t.is(r.text, '{"error":"Too many requests"}', what);
    t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
    t.is(r.headers.get('retry-after'), '1', what);
    t.true(r.ms < FAST_MS, `${what} refused in ${Math.round(r.ms)} ms`);
  };
  refused('Track', await track());
  refused('Identify', await identify());
  refused('Profiles', await profile());
  // A slot is taken once the environment is known: the slug, key and environment checks answer
  // as ever while the gateway is full (they hold nothing while a dependency is slow)...
  t.is((await timed(`/api/track/${tenant.slug}`, { body: '{' })).status, 401, 'Track without a key');
  t.is((await timed('/api/track/NOT_A_SLUG', { headers: auth, body: trackBody() })).status, 400, 'Track with a bad slug');
  // ...and an unknown path is still the plain-text 404.
  const unknown = await timed(`/api/track/${tenant.slug}/`, { headers: auth, body: trackBody() });
  t.is(unknown.status, 404);
  t.is(unknown.text, '404 Not Found');
  // Probes and metrics are neither counted nor limited.
  const health = await timed('/healthz', { method: 'GET' });
  t.is(health.status, 200);
  t.true(health.ms < FAST_MS);
  const text = await scrape();
  t.is(metric(text, METRIC_NAMES.inFlight), MAX_IN_FLIGHT);
  // This environment holds 1 of its 250: the process's total was the bound that refused.
  t.is(samples(text).get(series(METRIC_NAMES.refusals, { reason: 'in_flight' })), 3);
  t.is(samples(text).get(series(METRIC_NAMES.refusals, { reason: 'in_flight_environment' })), 0);
  t.regex(text, /^intake_http_requests_total\{route="track",status="429"\} 1$/m);
  t.regex(text, /^intake_http_requests_total\{route="identify",status="429"\} 1$/m);
  t.regex(text, /^intake_http_requests_total\{route="profiles",status="429"\} 1$/m);

  // Redis answers again: the held requests are stored and answered, and the bound is free.
  proxy.restore();
  for (const r of await heldReplies) t.is(r.status, 202, r.text);
  t.is(metric(await scrape(), METRIC_NAMES.inFlight), 0);
  // Two at once, one of each environment, fit the bound again.
  t.deepEqual(
    (await Promise.all([otherTrack(), identify()])).map((r) => r.status),
    [202, 200],
  );
  t.is((await profile()).status, 200);
  t.true((await queuedMessageIds(direct.operator.eventsQueue(), tenant.environmentId)).has(held[0].messageId as string));
  t.true((await queuedMessageIds(direct.operator.eventsQueue(), other.environmentId)).has(held[1].messageId as string));
});
