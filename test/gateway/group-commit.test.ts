// Track group commit: adds made in one event-loop turn become ONE BullMQ job listing their
// events (bounded in count and bytes); a batch whose add fails or times out rejects every add
// in it (each request answers 503) and stores none of its events; duplicates are not
// collapsed here (the events table's unique key makes them one event).
import test, { type ExecutionContext } from 'ava';
import { createEventsQueue, eventBatchName, type QueuedEvent } from '../../events/jobs.ts';
import { createRedis } from '../../platform/redis.ts';
import { createEventBatcher } from '../../gateway/event-batcher.ts';
import { startProxy } from '../helpers/proxy.ts';
import { openHarness, TEST_REDIS_URL, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

const event = (messageId: string, receivedAt = Date.now(), payload = JSON.stringify({ type: 'track', messageId })): QueuedEvent => ({
  environmentId: '00000000-0000-0000-0000-000000000001',
  messageId,
  receivedAt,
  timestampMs: 0,
  payload,
});

/** The gateway's kind of queue: a producer connection (fails fast), closed with the test. */
async function producerQueue(t: ExecutionContext, redisUrl: string) {
  const producer = createRedis({ redisUrl }, 'producer');
  producer.on('error', () => {});
  t.teardown(() => producer.disconnect());
  const queue = createEventsQueue(h.config, producer);
  queue.on('error', () => {});
  t.teardown(() => queue.close().catch(() => {}));
  await queue.waitUntilReady();
  return queue;
}

/** Every waiting batch job holding one of these messageIds (read over a direct connection). */
async function batchesWith(ids: string[]) {
  const wanted = new Set(ids);
  const jobs = await h.operator.eventsQueue().getJobs(['waiting'], 0, -1);
  return jobs.filter((j) => j.data.events.some((e) => wanted.has(e.messageId)));
}

const options = { maxBatch: 1000, maxBytes: 4 * 1_048_576, timeoutMs: 2000 };

test('adds made in one turn are one job listing every event; every add resolves once it is stored', async (t) => {
  const batches: number[] = [];
  const queue = await producerQueue(t, h.config.redisUrl);
  const batcher = createEventBatcher(queue, { ...options, onBatch: (size) => batches.push(size) });
  const now = Date.now();
  const ids = Array.from({ length: 25 }, (_, i) => `one-turn-${now}-${i}`);
  await Promise.all(ids.map((m, i) => batcher.add(event(m, now - 100 + i))));
  t.deepEqual(batches, [25]);
  const [job, ...others] = await batchesWith(ids);
  t.is(others.length, 0, 'one job');
  t.is(job.name, eventBatchName(25));
  t.deepEqual(
    job.data.events.map((e) => e.messageId),
    ids,
    'in arrival order',
  );
  t.deepEqual(job.data.events[3], event(ids[3], now - 97));
  t.is(job.timestamp, now - 100, "the job's time is its oldest event's receipt (what the journey watermark waits for)");
  t.is(job.id!.length < 20, true, 'BullMQ numbered it: no per-event id');
});

test('a full batch is written at once; the rest follow in the next', async (t) => {
  const batches: number[] = [];
  const queue = await producerQueue(t, h.config.redisUrl);
  const batcher = createEventBatcher(queue, { ...options, maxBatch: 10, onBatch: (size) => batches.push(size) });
  const ids = Array.from({ length: 25 }, (_, i) => `full-${Date.now()}-${i}`);
  await Promise.all(ids.map((m) => batcher.add(event(m))));
  t.deepEqual(
    batches.sort((a, b) => b - a),
    [10, 10, 5],
  );
  t.is((await batchesWith(ids)).length, 3);
});

test('the byte bound splits a turn of large events: a job carries at most maxBytes, or one event', async (t) => {
  const batches: number[] = [];
  const queue = await producerQueue(t, h.config.redisUrl);
  const batcher = createEventBatcher(queue, { ...options, maxBytes: 2_500_000, onBatch: (size) => batches.push(size) });
  const big = (m: string) => event(m, Date.now(), JSON.stringify({ type: 'track', messageId: m, blob: 'x'.repeat(1_000_000) }));
  const ids = Array.from({ length: 5 }, (_, i) => `bytes-${Date.now()}-${i}`);
  await Promise.all(ids.map((m) => batcher.add(big(m))));
  t.deepEqual(batches, [2, 2, 1]);
  const jobs = await batchesWith(ids);
  t.is(jobs.length, 3);
  t.true(jobs.every((j) => JSON.stringify(j.data).length < 2_500_000));
});

test('duplicates inside one batch travel in it (the database makes them one event)', async (t) => {
  const queue = await producerQueue(t, h.config.redisUrl);
  const batches: number[] = [];
  const batcher = createEventBatcher(queue, { ...options, onBatch: (size) => batches.push(size) });
  const stamp = Date.now();
  const messageIds = ['a', 'b', 'a', 'c', 'a', 'b'].map((m) => `dup-${stamp}-${m}`);
  await Promise.all(messageIds.map((m) => batcher.add(event(m))));
  t.deepEqual(batches, [6], 'one batch');
  const jobs = await batchesWith(messageIds);
  t.is(jobs.length, 1);
  t.is(jobs[0].data.events.length, 6);
});

for (const fault of ['stall', 'cut'] as const) {
  test(`a batch whose add ${fault === 'stall' ? 'times out' : 'fails'} rejects every add in it and stores none of its events`, async (t) => {
    const proxy = await startProxy(TEST_REDIS_URL);
    t.teardown(() => proxy.close());
    const queue = await producerQueue(t, proxy.url(TEST_REDIS_URL));

    proxy[fault](); // Redis stops answering (the add never completes in time), or the connection drops.
    const batches: { size: number; ok: boolean }[] = [];
    const batcher = createEventBatcher(queue, { ...options, timeoutMs: 300, onBatch: (size, ok) => batches.push({ size, ok }) });
    const ids = Array.from({ length: 12 }, (_, i) => `fail-${fault}-${Date.now()}-${i}`);
    const outcomes = await Promise.allSettled(ids.map((m) => batcher.add(event(m))));
    t.deepEqual(
      outcomes.map((o) => o.status),
      Array(12).fill('rejected'),
    );
    t.deepEqual(batches, [{ size: 12, ok: false }]);
    proxy.cut(); // a held add is dropped before it reaches Redis
    t.is((await batchesWith(ids)).length, 0, 'none of the batch is stored');
  });
}
