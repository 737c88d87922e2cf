// The received-time watermark: every event received before it has been handled by a worker.
// A batch job's timestamp is its oldest event's receipt (gateway/event-batcher.ts), so the
// oldest waiting batch bounds every event still queued.
// An event is on its way from its receipt until its job completes: inside a gateway's group
// commit (at most the enqueue bound), waiting in Redis, or active on a worker. The oldest job
// waiting and every active job are read from Redis; `graceMs` covers the gateway part and the
// few milliseconds between a request's receipt and its job's timestamp. Jobs waiting for a
// retry (delayed) are not waited for: a retried event lands late, as it would anyway.
import type { Queue } from 'bullmq';
import type { Redis } from '../platform/redis.ts';

/**
 * The receipt time (epoch ms) of the oldest event waiting in the events queue (any partition) or being stored
 * by a worker, or null when there is none. The journey watermark holds back to it; the worker's
 * `intake_queue_oldest_event_age_seconds` reports its age.
 *
 * BullMQ's public Job.timestamp is read from the job hash's `timestamp` field; reading that
 * field alone is this module's one reliance on BullMQ's layout (a batch job's data can be 4 MiB,
 * which getJob would fetch), pinned by test/workers/watermark.test.ts against getJob.
 */
export async function oldestQueuedReceipt(
  partitions: Pick<Queue, 'getRanges' | 'client' | 'toKey'> | Pick<Queue, 'getRanges' | 'client' | 'toKey'>[],
): Promise<number | null> {
  // Every partition: the oldest event still queued in any of them holds the watermark.
  if (Array.isArray(partitions)) {
    const each = await Promise.all(partitions.map((queue) => oldestQueuedReceipt(queue)));
    const known = each.filter((t): t is number => t !== null);
    return known.length ? Math.min(...known) : null;
  }
  const queue = partitions;
  const [oldestWaiting] = await queue.getRanges(['wait'], 0, 0, true);
  const active = await queue.getRanges(['active'], 0, -1);
  const ids = [...new Set([oldestWaiting, ...active].filter((id): id is string => Boolean(id)))];
  if (!ids.length) return null;
  const client = (await queue.client) as unknown as Redis;
  const pipeline = client.pipeline();
  for (const id of ids) pipeline.hget(queue.toKey(id), 'timestamp');
  const results = (await pipeline.exec()) ?? [];
  let oldest = Infinity;
  for (const [err, value] of results) {
    if (err) throw err;
    // A job that completed meanwhile has no timestamp left to wait for.
    if (value !== null && value !== undefined) oldest = Math.min(oldest, Number(value));
  }
  return oldest === Infinity ? null : oldest;
}

export function createWatermark(queue: Queue | Queue[], graceMs: number): { watermark(): Promise<number>; horizon(): number } {
  const horizon = () => Date.now() - graceMs;
  return {
    horizon,
    async watermark() {
      const bound = horizon();
      const oldest = await oldestQueuedReceipt(queue);
      return oldest === null ? bound : Math.min(bound, oldest - graceMs);
    },
  };
}
