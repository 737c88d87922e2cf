// Track group commit. Requests that arrive in the same turn of the event loop (up to
// `maxBatch`) are written to Redis together, in one MULTI/EXEC: the batch is stored whole or
// not at all, and each request is answered (202 or 503) only by its own batch's outcome.
// Every job is still one BullMQ job with its deterministic id, so a duplicate inside a batch
// or across batches stores one event.
import { Job, type Queue } from 'bullmq';
import { createMicroBatch } from '../common/micro-batch.ts';
import type { EventJob } from '../common/queues.ts';
import { withTimeout } from '../common/with-timeout.ts';

export interface EventBatcher {
  /** Resolves once the job is stored in Redis; rejects if its batch failed or timed out. */
  add(jobId: string, data: EventJob): Promise<void>;
}

export interface BatcherOptions {
  maxBatch: number;
  timeoutMs: number;
  /** Called after each batch with its size, for metrics. */
  onBatch?: (size: number, ok: boolean) => void;
}

export function createEventBatcher(queue: Queue<EventJob>, options: BatcherOptions): EventBatcher {
  async function write(batch: { jobId: string; data: EventJob }[]) {
    const client = await queue.client;
    const multi = client.multi();
    for (const { jobId, data } of batch) {
      const job = new Job<EventJob>(queue, 'track', data, { ...queue.jobsOpts, jobId }, jobId);
      // Queues the add script on the transaction synchronously (as Queue.addBulk relies on).
      job.addJob(multi as never).catch(() => {});
    }
    const results = await multi.exec();
    if (!results) throw new Error('transaction aborted');
    for (const [err] of results) if (err) throw err;
  }

  async function writeWithin(batch: { jobId: string; data: EventJob }[]) {
    try {
      await withTimeout(write(batch), options.timeoutMs, `enqueue took longer than ${options.timeoutMs} ms`);
      options.onBatch?.(batch.length, true);
    } catch (err) {
      options.onBatch?.(batch.length, false);
      throw err;
    }
  }

  const batch = createMicroBatch(writeWithin, { maxBatch: options.maxBatch, waitMs: 0 });
  return { add: (jobId, data) => batch.add({ jobId, data }) };
}
