// A worker's GET /metrics over HTTP: its own counters (each labelled one at zero from the
// start), how far behind it is, queue depths read from Redis, and the age of the oldest stored
// event (absent while none is stored).
import test from 'ava';
import { poolOf } from '../../platform/db.ts';
import { createEventsQueue } from '../../events/jobs.ts';
import { createRedis } from '../../platform/redis.ts';
import { BATCH_OUTCOMES, createWorkerMetrics, EVENT_OUTCOMES, JOURNEY_MESSAGE_STATUSES } from '../../workers/metrics.ts';
import { oldestQueuedReceipt } from '../../workers/watermark.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake, type Child } from '../helpers/processes.ts';
import { startFreezableProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, ownDatabase, testConfig, testEnv, TEST_REDIS_URL, type Harness } from '../helpers/services.ts';

let h: Harness;
let worker: Child;
let metricsUrl: string;
/** The worker's first scrape, before it handled anything. */
let initial: string;

test.before(async () => {
  h = await openHarness();
  worker = await spawnIntake('worker', h.env);
  metricsUrl = `http://127.0.0.1:${/"metricsPort":(\d+)/.exec(worker.output())![1]}`;
  initial = (await request(metricsUrl, '/metrics', { method: 'GET' })).text;
});

test.after.always(async () => {
  await worker?.kill('SIGTERM');
  await h?.close();
});

const sample = (text: string, line: string) => {
  const found = text.split('\n').find((l) => l.startsWith(line + ' '));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
};

test('stored events, batches, events per batch, stored lag, insert sizes and queue depths by state', async (t) => {
  const gateway = await gatewayInProcess(h);
  try {
    const tenant = await newTenant(h);
    for (let i = 0; i < 3; i++) {
      const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() });
      t.is(reply.status, 202);
    }
    const text = await eventually(async () => {
      const reply = await request(metricsUrl, '/metrics', { method: 'GET' });
      return sample(reply.text, 'intake_worker_events_total{outcome="stored"}') === 3 ? reply.text : null;
    });
    t.truthy(text, 'three events stored');
    t.is(sample(text!, 'intake_worker_insert_batch_size_sum'), 3);
    t.is(sample(text!, 'intake_worker_batches_total{outcome="completed"}'), 3, 'three requests one after another: three batch jobs');
    t.is(sample(text!, 'intake_queue_jobs{queue="events",state="completed"}'), 0, 'completed batches leave Redis at once');
    t.is(sample(text!, 'intake_worker_batch_events_sum'), 3);
    t.is(sample(text!, 'intake_worker_batch_events_count'), 3);
    t.is(sample(text!, 'intake_worker_stored_lag_seconds_count'), 3);
    t.true(sample(text!, 'intake_worker_stored_lag_seconds_sum')! < 30, 'received to stored in seconds');
    t.is(sample(text!, 'intake_queue_jobs{queue="events-dead-letter",state="failed"}'), 0);
    t.is(sample(text!, 'intake_queue_jobs{queue="events",state="waiting"}'), 0);
    // Any worker on the database may relay another file's Identify changes (the outbox is global): counted, not zero.
    t.regex(text!, /^intake_journey_entries_total \d+$/m);
    t.regex(text!, /^process_resident_memory_bytes \d+/m);
  } finally {
    await gateway.close();
  }
});

test('before the first event, every labelled counter has each of its label values at zero, and nothing waits', (t) => {
  const expected = [
    ...EVENT_OUTCOMES.map((outcome) => `intake_worker_events_total{outcome="${outcome}"}`),
    ...BATCH_OUTCOMES.map((outcome) => `intake_worker_batches_total{outcome="${outcome}"}`),
    ...JOURNEY_MESSAGE_STATUSES.map((status) => `intake_journey_messages_total{status="${status}"}`),
  ];
  t.deepEqual(expected.length, 9);
  for (const line of expected) t.is(sample(initial, line), 0, line);
  t.is(sample(initial, 'intake_queue_oldest_event_age_seconds{queue="events"}'), 0);
  t.is(sample(initial, 'intake_worker_stored_lag_seconds_count'), 0);
});

test("the oldest queued event's age: the oldest batch waiting, left out while Redis hangs", async (t) => {
  const proxy = await startFreezableProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  const config = testConfig(testEnv({ REDIS_URL: proxy.url(TEST_REDIS_URL) }));
  const redis = createRedis(config, 'worker');
  const queue = createEventsQueue(config, redis);
  t.teardown(async () => {
    proxy.restore();
    await queue.obliterate({ force: true });
    await queue.close();
    redis.disconnect();
  });
  // Nothing takes jobs from this queue: what is added waits.
  const { registry } = createWorkerMetrics({ queues: {}, oldestQueuedReceipt: () => oldestQueuedReceipt(queue) });
  const age = async () => sample(await registry.metrics(), 'intake_queue_oldest_event_age_seconds{queue="events"}');

  // The first reads connect to Redis; on a loaded machine that may take longer than the scrape's bound.
  t.true(await eventually(async () => (await age()) === 0), 'empty queue');
  // Jobs are added in receipt order (each gateway batch's timestamp is its oldest event's receipt).
  await queue.add('track', {} as never, { timestamp: Date.now() - 90_000 });
  await queue.add('track', {} as never, { timestamp: Date.now() - 30_000 });
  const seconds = (await eventually(() => age()))!;
  t.true(seconds >= 90 && seconds < 100, `${seconds}`);

  proxy.freeze();
  const started = performance.now();
  t.is(await age(), undefined, 'absent rather than stale');
  t.true(performance.now() - started < 2500);
  proxy.restore();
  t.true(await eventually(async () => ((await age()) ?? 0) >= 90), 'read again once Redis answers');
});

test('healthz and readyz answer; other paths are 404; a second worker on a taken port runs without metrics', async (t) => {
  t.is((await request(metricsUrl, '/healthz', { method: 'GET' })).status, 200);
  const ready = await request(metricsUrl, '/readyz', { method: 'GET' });
  t.is(ready.status, 200);
  t.deepEqual(ready.json, { status: 'ready', postgres: true, redis: true });
  t.is((await request(metricsUrl, '/nope', { method: 'GET' })).status, 404);
  const port = new URL(metricsUrl).port;
  const second = await spawnIntake('worker', { ...h.env, WORKER_METRICS_PORT: port });
  try {
    t.regex(second.output(), /"msg":"worker metrics not served"/);
    t.regex(second.output(), /"metricsPort":null/);
  } finally {
    await second.kill('SIGTERM');
  }
});

test("the oldest stored event's age: absent while the database holds no event, then the age of the one stored", async (t) => {
  // A database of the file's own: the shared one holds other files' events.
  const own = await openHarness({ DATABASE_URL: await ownDatabase('worker_metrics'), STORAGE_MAINTENANCE_MS: '1000' });
  t.teardown(() => own.close());
  await poolOf(own.db).query('DELETE FROM events');
  const child = await spawnIntake('worker', own.env);
  t.teardown(() => child.kill('SIGTERM'));
  const url = `http://127.0.0.1:${/"metricsPort":(\d+)/.exec(child.output())![1]}`;
  const scrape = async () => (await request(url, '/metrics', { method: 'GET' })).text;
  const AGE = 'intake_events_oldest_age_seconds';

  // The storage series appear with the worker's first maintenance round.
  const first = await eventually(async () => {
    const text = await scrape();
    return sample(text, 'intake_storage_bytes{table="events"}') === undefined ? null : text;
  });
  t.truthy(first, 'a maintenance round');
  t.true(sample(first!, 'intake_events_partitions')! > 0);
  t.is(sample(first!, AGE), undefined, 'no age while no event is stored');

  const gateway = await gatewayInProcess(own);
  t.teardown(() => gateway.close());
  const tenant = await newTenant(own);
  const sent = Date.now();
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() })).status, 202);
  const age = await eventually(async () => sample(await scrape(), AGE));
  t.true(age !== undefined && age > 0 && age <= (Date.now() - sent) / 1000 + 1, `${age}`);
});
