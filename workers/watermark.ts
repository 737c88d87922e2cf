// The received-time watermark: every event received before it has been handled by a worker.
// A batch job's timestamp is its oldest event's receipt (gateway/event-batcher.ts), so the
// oldest waiting batch bounds every event still queued.
// An event is on its way from its receipt until its job completes: inside a gateway's group
// commit (at most the enqueue bound), waiting in Redis, or active on a worker. The oldest job
// waiting and every active job are read from Redis; `graceMs` covers the gateway part and the
// few milliseconds between a request's receipt and its job's timestamp. Jobs waiting for a
// retry (delayed) are not waited for: a retried event lands late, as it would anyway.
import type { Queue } from 'bullmq';
import type { Redis } from '../common/redis.ts';

/**
 * The receipt time (epoch ms) of the oldest event waiting in the events queue or being stored
 * by a worker, or null when there is none. The journey watermark holds back to it; the worker's
 * `intake_queue_oldest_event_age_seconds` reports its age.
 */
export async function oldestQueuedReceipt(queue: Pick<Queue, 'getRanges' | 'client' | 'toKey'>): Promise<number | null> {
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

export function createWatermark(queue: Queue, graceMs: number): { watermark(): Promise<number>; horizon(): number } {
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
