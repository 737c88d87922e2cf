// A batch job carries many events, and each reads back as one: duplicates inside one batch
// and across batches store one event, an event of a waiting batch reads as `pending` (events
// get, the activity list), and the journey watermark waits for a queued batch. A completed
// batch leaves Redis; a failed one stays with its events.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { eventsActivity, eventsGet } from '../../cli/commands/events.ts';
import { journeyCreate, journeyPublish } from '../../cli/commands/journey.ts';
import { eventBatchName } from '../../events/jobs.ts';
import type { Redis } from '../../platform/redis.ts';
import { createEventBatcher } from '../../gateway/event-batcher.ts';
import { createWatermark } from '../../workers/watermark.ts';
import { batchCompleted, nothingToRun, queuedEvent } from '../helpers/batches.ts';
import { eventually } from '../helpers/eventually.ts';
import { workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => closeEmptied(h));

const queued = (tenant: Tenant, body: Record<string, unknown>, receivedAt?: number) => queuedEvent(tenant.environmentId, body, receivedAt);

test('duplicates inside one batch and across batches store one event each', async (t) => {
  const hq = await openHarness();
  t.teardown(() => closeEmptied(hq));
  const tenant = await newTenant(hq);
  const stamp = Date.now();
  const e = (m: string, n: number) => queued(tenant, { messageId: `dup-${stamp}-${m}`, properties: { n } });
  const queue = hq.operator.eventsQueue();
  // Both batches wait before a worker starts, so that they are processed side by side.
  await queue.add(eventBatchName(5), { events: [e('a', 1), e('b', 1), e('a', 2), e('c', 1), e('a', 3)] });
  await queue.add(eventBatchName(3), { events: [e('b', 2), e('d', 1), e('a', 4)] });
  const worker = await workerInProcess(hq);
  t.teardown(() => worker.close());

  const done = await eventually(async () => (await hq.db.event.count({ where: { environmentId: tenant.environmentId } })) === 4 && (await nothingToRun(queue)));
  t.true(done);
  t.deepEqual(await queue.getJobCounts('completed', 'failed'), { completed: 0, failed: 0 }, 'completed batches left Redis');
  const rows = await hq.db.event.findMany({ where: { environmentId: tenant.environmentId }, orderBy: { messageId: 'asc' } });
  t.deepEqual(
    rows.map((r) => r.messageId),
    ['a', 'b', 'c', 'd'].map((m) => `dup-${stamp}-${m}`),
  );
  t.true(rows.every((r) => r.status === 'processed'));
  // The first to arrive is the event: a within a batch, b across batches (the first batch was first).
  t.is(JSON.parse(rows[0].payload).properties.n, 1);
  t.is(JSON.parse(rows[1].payload).properties.n, 1);
});

test('an event of a waiting batch reads as pending in events get and the activity list', async (t) => {
  const hq = await openHarness();
  t.teardown(() => closeEmptied(hq));
  const tenant = await newTenant(hq);
  const dir = await mkdtemp(path.join(tmpdir(), 'intake-batches-'));
  const file = path.join(dir, 'j.json');
  await writeFile(file, JSON.stringify({ name: 'j', entry: { event: 'Signed Up' }, steps: [] }));
  const journey = await journeyCreate(hq.operator, [tenant.slug, '--file', file]);
  await journeyPublish(hq.operator, [tenant.slug, journey.id]);

  const events = [queued(tenant, { event: 'Page Viewed' }), queued(tenant, { event: 'Signed Up', userId: 'u-9' }), queued(tenant, { event: 'Other' })];
  await hq.operator.eventsQueue().add(eventBatchName(3), { events });

  const got = await eventsGet(hq.operator, [tenant.slug, events[1].messageId]);
  t.like(got, { messageId: events[1].messageId, status: 'pending', receivedAt: events[1].receivedAt, drivesJourneys: true });
  t.like(got.event, { event: 'Signed Up', userId: 'u-9' });
  t.like(await eventsGet(hq.operator, [tenant.slug, events[2].messageId]), { status: 'pending' });

  const activity = await eventsActivity(hq.operator, [tenant.slug]);
  t.deepEqual(activity, [
    {
      event: 'Signed Up',
      messageId: events[1].messageId,
      userId: 'u-9',
      anonymousId: null,
      source: 'track-api',
      status: 'pending',
      receivedAt: events[1].receivedAt,
    },
  ]);

  const worker = await workerInProcess(hq);
  t.teardown(() => worker.close());
  const stored = await eventually(async () => ((await eventsGet(hq.operator, [tenant.slug, events[1].messageId])).status === 'processed' ? true : null));
  t.true(stored);
  t.like((await eventsActivity(hq.operator, [tenant.slug]))[0], { messageId: events[1].messageId, status: 'processed' });
});

test('the journey watermark waits for a queued batch: its oldest event, less the grace', async (t) => {
  const hq = await openHarness();
  t.teardown(() => closeEmptied(hq));
  const tenant = await newTenant(hq);
  const queue = hq.operator.eventsQueue();
  const graceMs = 2500;
  const { watermark, horizon } = createWatermark(queue, graceMs);
  const before = Date.now() - graceMs;
  const empty = await watermark();
  t.true(empty >= before && empty <= horizon(), 'nothing queued: the clock less the grace');

  // Written by the gateway's batcher, as in production: received a minute ago, still queued.
  const batcher = createEventBatcher(queue, { maxBatch: 256, maxBytes: 4_194_304, timeoutMs: 2000 });
  const oldest = Date.now() - 60_000;
  await Promise.all([batcher.add(queued(tenant, {}, oldest + 5)), batcher.add(queued(tenant, {}, oldest)), batcher.add(queued(tenant, {}, oldest + 9))]);
  t.is(await watermark(), oldest - graceMs);

  const worker = await workerInProcess(hq);
  t.teardown(() => worker.close());
  const moved = await eventually(async () => (await watermark()) > oldest + 30_000);
  t.true(moved, 'the watermark moves on once the batch is stored');
});

test('a completed batch job keeps nothing in Redis; a failed one keeps its events', async (t) => {
  const hq = await openHarness();
  t.teardown(() => closeEmptied(hq));
  const tenant = await newTenant(hq);
  const queue = hq.operator.eventsQueue();
  const stamp = Date.now();
  const good = await queue.add(eventBatchName(2), {
    events: [queued(tenant, { messageId: `kept-${stamp}-1` }), queued(tenant, { messageId: `kept-${stamp}-2` })],
  });
  // Not a list of events: the worker fails it at once (UnrecoverableError), as it would any batch out of attempts.
  const broken = { events: 'not a list', note: `broken-${stamp}` } as never;
  const bad = await queue.add(eventBatchName(1), broken);
  const worker = await workerInProcess(hq);
  t.teardown(() => worker.close());

  t.true(await batchCompleted(queue, good.id!), 'the stored batch completed');
  t.is(await hq.db.event.count({ where: { environmentId: tenant.environmentId } }), 2);
  const client = (await queue.client) as unknown as Redis;
  t.is(await client.exists(queue.toKey(good.id!)), 0, 'its hash, payload included, is gone from Redis');
  t.is((await queue.getJobCounts('completed')).completed, 0);

  const failed = await eventually(async () => {
    const job = await queue.getJob(bad.id!);
    return job && (await job.getState()) === 'failed' ? job : null;
  });
  t.truthy(failed, 'the broken batch failed');
  t.deepEqual(failed!.data, broken, 'and keeps its payload for inspection');
  t.is(failed!.failedReason, 'not a batch of events');
});
