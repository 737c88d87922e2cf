// Track group commit keeps the contract: adds made in one event-loop turn go to Redis as one
// MULTI/EXEC; a batch that fails rejects every add in it (each request answers 503) and
// stores none of its jobs; duplicates inside one batch make one job.
import test, { type ExecutionContext } from 'ava';
import { createEventsQueue, jobIdFor, type EventJob } from '../../common/queues.ts';
import { createRedis } from '../../common/redis.ts';
import { createEventBatcher } from '../../gateway/event-batcher.ts';
import { startProxy } from '../helpers/proxy.ts';
import { openHarness, TEST_REDIS_URL, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

const job = (messageId: string): EventJob => ({
  environmentId: '00000000-0000-0000-0000-000000000001',
  messageId,
  receivedAt: Date.now(),
  timestampMs: 0,
  payload: JSON.stringify({ type: 'track', messageId }),
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

/** How many of these job ids exist in the harness's queue (read over a direct connection). */
async function jobsIn(ids: string[]) {
  const queue = h.operator.eventsQueue();
  const found = await Promise.all(ids.map((id) => queue.getJob(id)));
  return found.filter(Boolean).length;
}

test('adds made in one turn are one batch; every add resolves once the batch is stored', async (t) => {
  const batches: number[] = [];
  const queue = await producerQueue(t, h.config.redisUrl);
  const batcher = createEventBatcher(queue, { maxBatch: 1000, timeoutMs: 2000, onBatch: (size) => batches.push(size) });
  const ids = Array.from({ length: 25 }, (_, i) => `one-turn-${Date.now()}-${i}`);
  await Promise.all(ids.map((m) => batcher.add(jobIdFor(job(m).environmentId, m), job(m))));
  t.deepEqual(batches, [25]);
  t.is(await jobsIn(ids.map((m) => jobIdFor(job(m).environmentId, m))), 25);
});

test('a full batch is written at once; the rest follow in the next', async (t) => {
  const batches: number[] = [];
  const queue = await producerQueue(t, h.config.redisUrl);
  const batcher = createEventBatcher(queue, { maxBatch: 10, timeoutMs: 2000, onBatch: (size) => batches.push(size) });
  const ids = Array.from({ length: 25 }, (_, i) => `full-${Date.now()}-${i}`);
  await Promise.all(ids.map((m) => batcher.add(jobIdFor(job(m).environmentId, m), job(m))));
  t.deepEqual(
    batches.sort((a, b) => b - a),
    [10, 10, 5],
  );
});

test('duplicates inside one batch store one job each', async (t) => {
  const queue = await producerQueue(t, h.config.redisUrl);
  const batches: number[] = [];
  const batcher = createEventBatcher(queue, { maxBatch: 1000, timeoutMs: 2000, onBatch: (size) => batches.push(size) });
  const stamp = Date.now();
  const messageIds = ['a', 'b', 'a', 'c', 'a', 'b'].map((m) => `dup-${stamp}-${m}`);
  await Promise.all(messageIds.map((m) => batcher.add(jobIdFor(job(m).environmentId, m), job(m))));
  t.deepEqual(batches, [6], 'one batch');
  const before = await queue.getJobCounts('waiting');
  t.is(await jobsIn([...new Set(messageIds)].map((m) => jobIdFor(job(m).environmentId, m))), 3);
  t.true(before.waiting >= 3);
  const waiting = await queue.getWaiting(0, 1000);
  t.is(waiting.filter((j) => j.data.messageId.startsWith(`dup-${stamp}-`)).length, 3, 'three jobs for three distinct messageIds');
});

test('a batch that fails rejects every add in it and stores none of its jobs', async (t) => {
  const proxy = await startProxy(Number(new URL(TEST_REDIS_URL).port || 6379));
  t.teardown(() => proxy.close());
  const queue = await producerQueue(t, proxy.url('redis'));

  proxy.stall(); // Redis stops answering: the transaction never completes in time.
  const batches: { size: number; ok: boolean }[] = [];
  const batcher = createEventBatcher(queue, { maxBatch: 1000, timeoutMs: 300, onBatch: (size, ok) => batches.push({ size, ok }) });
  const ids = Array.from({ length: 12 }, (_, i) => `fail-${Date.now()}-${i}`);
  const outcomes = await Promise.allSettled(ids.map((m) => batcher.add(jobIdFor(job(m).environmentId, m), job(m))));
  t.deepEqual(
    outcomes.map((o) => o.status),
    Array(12).fill('rejected'),
  );
  t.deepEqual(batches, [{ size: 12, ok: false }]);
  proxy.cut(); // the held transaction is dropped before EXEC reaches Redis
  t.is(await jobsIn(ids.map((m) => jobIdFor(job(m).environmentId, m))), 0, 'none of the batch is stored');
});
