// GET /metrics of the gateway: request counts and latencies by route name and status, Track's
// group-commit batch sizes, the events queue's depths (read at scrape time, left out rather
// than hanging when Redis does not answer), in-flight requests, uploads being read, overload
// refusals by reason and cut uploads; every API route's documented statuses exist at zero from
// the start, and so does every refusal reason. The read replica's lag is there only while one is
// configured and answers.
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { METRIC_NAMES, ROUTE_STATUSES } from '../../gateway/metrics/gateway-metrics.ts';
import { REFUSAL_REASONS } from '../../gateway/admission.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { freePort } from '../helpers/free-port.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startFreezableProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/services.ts';

test('before any request, every status an API route can answer has its series at zero', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const m = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  let count = 0;
  for (const [route, statuses] of Object.entries(ROUTE_STATUSES)) {
    for (const status of statuses) {
      t.is(m.get(series(METRIC_NAMES.requests, { route, status })), 0, `${route} ${status}`);
      t.is(m.get(series(`${METRIC_NAMES.duration}_bucket`, { route, status, le: '+Inf' })), 0, `${route} ${status}`);
      t.is(m.get(series(`${METRIC_NAMES.duration}_count`, { route, status })), 0, `${route} ${status}`);
      count++;
    }
  }
  t.true(count > 20);
  t.is(m.get(series(`${METRIC_NAMES.batchSize}_count`, { outcome: 'failed' })), 0);
  for (const reason of REFUSAL_REASONS) t.is(m.get(series(METRIC_NAMES.refusals, { reason })), 0, reason);
  t.is(m.get(METRIC_NAMES.uploadsCut), 0);
});

test("the API routes' statuses are docs/openapi.yaml's, less the 417 and 431 Node's HTTP server answers before routing", (t) => {
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
  const doc = parse(readFileSync(path.join(root, 'docs/openapi.yaml'), 'utf8'));
  const documented = new Map<string, number[]>();
  for (const operations of Object.values<Record<string, { operationId?: string; responses?: object }>>(doc.paths)) {
    for (const op of Object.values(operations)) {
      if (op?.operationId && op.responses) documented.set(op.operationId, Object.keys(op.responses).map(Number));
    }
  }
  const routeOf: Record<string, keyof typeof ROUTE_STATUSES> = { track: 'track', identify: 'identify', getProfile: 'profiles' };
  t.deepEqual([...documented.keys()].sort(), Object.keys(routeOf).sort());
  for (const [operationId, statuses] of documented) {
    t.deepEqual([...ROUTE_STATUSES[routeOf[operationId]]].sort(), statuses.filter((s) => s !== 417 && s !== 431).sort(), operationId);
  }
});

test('after a few requests the metrics have the right counters, labels and values', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const tenant = await newTenant(h);
  const auth = { 'x-api-key': tenant.key };

  for (let i = 0; i < 3; i++) t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: auth, body: trackBody() })).status, 202);
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': 'itk_wrong' }, body: trackBody() })).status, 401);
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: auth, body: '{' })).status, 400);
  t.is((await request(gateway.url, `/api/identify/${tenant.slug}`, { headers: auth, body: { userId: 'm-1', traits: { a: 1 } } })).status, 200);
  t.is((await request(gateway.url, `/api/profiles/${tenant.slug}/m-1`, { method: 'GET', headers: auth })).status, 200);
  t.is((await request(gateway.url, `/api/profiles/${tenant.slug}/nobody`, { method: 'GET', headers: auth })).status, 404);
  t.is((await request(gateway.url, `/api/track/${tenant.slug}/`, { headers: auth, body: trackBody() })).status, 404);
  t.is((await request(gateway.url, '/healthz', { method: 'GET' })).status, 200);

  const reply = await request(gateway.url, '/metrics', { method: 'GET' });
  t.is(reply.status, 200);
  t.regex(reply.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const m = samples(reply.text);
  const get = (name: string, labels?: Record<string, string | number>) => m.get(series(name, labels));

  const expected: [string, string, number][] = [
    ['track', '202', 3],
    ['track', '401', 1],
    ['track', '400', 1],
    ['identify', '200', 1],
    ['profiles', '200', 1],
    ['profiles', '404', 1],
    ['unmatched', '404', 1],
    ['healthz', '200', 1],
  ];
  for (const [route, status, count] of expected) {
    t.is(get(METRIC_NAMES.requests, { route, status }), count, `${route} ${status}`);
    t.is(get(`${METRIC_NAMES.duration}_count`, { route, status }), count, `latency count of ${route} ${status}`);
    t.is(get(`${METRIC_NAMES.duration}_bucket`, { route, status, le: '+Inf' }), count);
    const sum = get(`${METRIC_NAMES.duration}_sum`, { route, status }) ?? NaN;
    t.true(sum > 0 && sum < 10, `latency sum of ${route} ${status}: ${sum}`);
  }
  // Exactly these series: every API route's statuses (at zero where nothing was answered) and the
  // other routes that answered (the /metrics request itself is counted only once it is answered).
  const requestSeries = [...m.keys()].filter((k) => k.startsWith(METRIC_NAMES.requests + '{'));
  const known = Object.entries(ROUTE_STATUSES).flatMap(([route, statuses]) => statuses.map((status) => series(METRIC_NAMES.requests, { route, status })));
  const others = expected.filter(([route]) => !(route in ROUTE_STATUSES)).map(([route, status]) => series(METRIC_NAMES.requests, { route, status }));
  t.deepEqual(new Set(requestSeries), new Set([...known, ...others]));
  t.is(get(METRIC_NAMES.requests, { route: 'track', status: '503' }), 0);
  t.is(get(`${METRIC_NAMES.duration}_count`, { route: 'identify', status: '429' }), 0);

  // Buckets are cumulative and end at the count.
  const buckets = [...m.entries()].filter(([k]) => k.startsWith(`${METRIC_NAMES.duration}_bucket{route="track",status="202",`)).map(([, v]) => v);
  t.true(buckets.length > 5);
  t.deepEqual(
    buckets,
    [...buckets].sort((a, b) => a - b),
  );
  t.is(buckets.at(-1), 3);

  // Three Track requests one after another: three batches of one, all stored.
  t.is(get(`${METRIC_NAMES.batchSize}_count`, { outcome: 'stored' }), 3);
  t.is(get(`${METRIC_NAMES.batchSize}_sum`, { outcome: 'stored' }), 3);
  t.is(get(`${METRIC_NAMES.batchSize}_bucket`, { le: 1, outcome: 'stored' }), 3);
  t.is(get(`${METRIC_NAMES.batchSize}_count`, { outcome: 'failed' }), 0);

  // No worker runs on this harness's queue: the three events wait in it.
  t.is(get(METRIC_NAMES.queueJobs, { queue: 'events', state: 'waiting' }), 3);
  t.is(get(METRIC_NAMES.queueJobs, { queue: 'events', state: 'failed' }), 0);
  t.is(get(METRIC_NAMES.queueJobs, { queue: 'events', state: 'active' }), 0);

  t.is(get(METRIC_NAMES.inFlight), 0);
  t.is(get(METRIC_NAMES.uploads), 0);
  for (const reason of REFUSAL_REASONS) t.is(get(METRIC_NAMES.refusals, { reason }), 0, reason);
  t.is(get(METRIC_NAMES.uploadsCut), 0);
  // prom-client's process metrics are there too.
  t.true(m.has('process_cpu_user_seconds_total'));

  // The scrape itself is counted from the next one on.
  const again = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  t.is(again.get(series(METRIC_NAMES.requests, { route: 'metrics', status: '200' })), 1);
});

test('a scrape answers within its bound while Redis hangs, without queue depths, and has them again after', async (t) => {
  const proxy = await startFreezableProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  const h = await openHarness({ REDIS_URL: proxy.url(TEST_REDIS_URL) });
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const depth = (text: string) => samples(text).get(series(METRIC_NAMES.queueJobs, { queue: 'events', state: 'waiting' }));

  // The first scrapes connect to Redis through the proxy; on a loaded machine that may take longer than the bound.
  t.true(await eventually(async () => depth((await request(gateway.url, '/metrics', { method: 'GET' })).text) === 0));
  proxy.freeze();
  const started = performance.now();
  const frozen = await request(gateway.url, '/metrics', { method: 'GET', timeoutMs: 10_000 });
  const ms = performance.now() - started;
  t.is(frozen.status, 200);
  t.true(ms < 2500, `answered in ${Math.round(ms)} ms`);
  t.is(depth(frozen.text), undefined);
  t.regex(frozen.text, /^intake_http_requests_total\{route="metrics",status="200"\} [1-9]\d*$/m, 'the earlier scrapes, counted');
  proxy.restore();
  t.is(depth((await request(gateway.url, '/metrics', { method: 'GET' })).text), 0);
});

const REPLICA_LAG = 'intake_read_replica_lag_seconds';
const REPLICA_IN_USE = 'intake_read_replica_in_use';

test('without DATABASE_READ_URL there is no replica lag to report: the series is absent, and reads are on the primary', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  t.is(h.config.databaseReadUrl, '');
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const m = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  t.false(m.has(REPLICA_LAG));
  t.is(m.get(REPLICA_IN_USE), 0);
});

test('with DATABASE_READ_URL: the lag is there once the server answers (0 for one that is not a standby: it reads its own writes), absent while none answers', async (t) => {
  // A server that is not a standby (the primary itself) is the one read replica at hand here; test/cluster/read-replica.test.ts has a real one.
  const h = await openHarness({ DATABASE_READ_URL: TEST_DATABASE_URL });
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const scrape = async () => samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  t.true(await eventually(async () => (await scrape()).get(REPLICA_IN_USE) === 1));
  t.is((await scrape()).get(REPLICA_LAG), 0);

  // A port nothing listens on: the replica never answers, reading after reading.
  const down = await openHarness({ DATABASE_READ_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/intake_test` });
  t.teardown(() => down.close());
  const unreachable = await gatewayInProcess(down);
  t.teardown(() => unreachable.close());
  await sleep(2500);
  const m = samples((await request(unreachable.url, '/metrics', { method: 'GET' })).text);
  t.false(m.has(REPLICA_LAG));
  t.is(m.get(REPLICA_IN_USE), 0);
});
