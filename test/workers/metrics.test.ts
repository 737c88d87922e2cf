// A worker's GET /metrics over HTTP: its own counters, and queue depths read from Redis.
import test from 'ava';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake, type Child } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
let worker: Child;
let metricsUrl: string;

test.before(async () => {
  h = await openHarness();
  worker = await spawnIntake('worker', h.env);
  metricsUrl = `http://127.0.0.1:${/"metricsPort":(\d+)/.exec(worker.output())![1]}`;
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
    t.is(sample(text!, 'intake_queue_jobs{queue="events",state="completed"}'), 3, 'three requests one after another: three batch jobs');
    t.is(sample(text!, 'intake_worker_batches_total{outcome="completed"}'), 3);
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
