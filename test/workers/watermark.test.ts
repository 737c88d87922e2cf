// The journey watermark read from a real events queue: no event still on its way is older.
import test from 'ava';
import { Worker } from 'bullmq';
import { EVENTS_QUEUE } from '../../platform/queues.ts';
import { createEventsQueue } from '../../events/jobs.ts';
import { createRedis } from '../../platform/redis.ts';
import { createWatermark, oldestQueuedReceipt } from '../../workers/watermark.ts';
import { testConfig, testEnv } from '../helpers/services.ts';

test('empty queue: the clock less the grace; then the oldest job waiting or active, less the grace', async (t) => {
  const config = testConfig(testEnv());
  const redis = createRedis(config, 'worker');
  const queue = createEventsQueue(config, redis);
  const workerConnection = redis.duplicate();
  const worker = new Worker(EVENTS_QUEUE, null, { connection: workerConnection, prefix: config.queuePrefix, autorun: false });
  try {
    const { watermark, horizon } = createWatermark(queue, 500);
    const before = Date.now();
    const empty = await watermark();
    t.true(empty >= before - 500 && empty <= Date.now() - 500);
    t.true(horizon() >= empty);

    const oldest = await queue.add('track', {} as never, { jobId: 'oldest', timestamp: before - 60_000 });
    await queue.add('track', {} as never, { jobId: 'newer', timestamp: before - 30_000 });
    t.is(await watermark(), oldest.timestamp - 500, 'the oldest waiting job holds it back');

    // A worker takes the oldest: active, it still holds the watermark back; once completed, the next one does.
    const active = await worker.getNextJob('token');
    t.is(active?.id, 'oldest');
    t.is(await watermark(), before - 60_000 - 500);
    await active!.moveToCompleted('done', 'token', false);
    t.is(await watermark(), before - 30_000 - 500);
  } finally {
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
    workerConnection.disconnect();
    redis.disconnect();
  }
});

test("the receipt read from the job hash is BullMQ's own Job.timestamp (the one field of its layout relied on)", async (t) => {
  const config = testConfig(testEnv());
  const redis = createRedis(config, 'worker');
  const queue = createEventsQueue(config, redis);
  try {
    const added = await queue.add('track', {} as never, { jobId: 'pinned', timestamp: 1_700_000_000_123 });
    const job = await queue.getJob('pinned');
    t.is(job?.timestamp, 1_700_000_000_123);
    t.is(await oldestQueuedReceipt(queue), job!.timestamp);
    t.is(added.timestamp, job!.timestamp);
  } finally {
    await queue.obliterate({ force: true });
    await queue.close();
    redis.disconnect();
  }
});
