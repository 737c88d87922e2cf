// Track group commit. The requests that arrive in the same turn of the event loop (up to
// `maxBatch` events and about `maxBytes` of payload) become ONE BullMQ job listing their
// events: BullMQ's cost (building a Job, its add script of about ten Redis commands, and the
// worker's fetch and completion scripts) is paid per batch, not per event. The job is stored
// whole or not at all, and each request is answered (202 or 503) by its own batch's outcome.
// No per-event job id: the events table's unique key makes a repeat one event.
import type { Queue } from 'bullmq';
import { createMicroBatch } from '../common/micro-batch.ts';
import { eventBatchName, type EventBatchJob, type QueuedEvent } from '../common/queues.ts';
import { withTimeout } from '../common/with-timeout.ts';

export interface EventBatcher {
  /** Resolves once the event's batch job is stored in Redis; rejects if the add failed or timed out. */
  add(event: QueuedEvent): Promise<void>;
}

export interface BatcherOptions {
  maxBatch: number;
  /** Payload bytes one job carries at most (a batch always takes one event, whatever its size). */
  maxBytes: number;
  timeoutMs: number;
  /** Called after each batch with its size, for metrics. */
  onBatch?: (size: number, ok: boolean) => void;
}

export function createEventBatcher(queue: Queue<EventBatchJob>, options: BatcherOptions): EventBatcher {
  async function write(events: QueuedEvent[]) {
    let oldest = events[0].receivedAt;
    for (const e of events) if (e.receivedAt < oldest) oldest = e.receivedAt;
    // The job's timestamp is its oldest event's receipt: the journey watermark waits for it.
    await queue.add(eventBatchName(events.length), { events }, { timestamp: oldest });
  }

  async function writeWithin(events: QueuedEvent[]) {
    try {
      await withTimeout(write(events), options.timeoutMs, `enqueue took longer than ${options.timeoutMs} ms`);
      options.onBatch?.(events.length, true);
    } catch (err) {
      options.onBatch?.(events.length, false);
      throw err;
    }
  }

  const batch = createMicroBatch(writeWithin, {
    maxBatch: options.maxBatch,
    waitMs: 0,
    // String length, not UTF-8 bytes: close enough for a memory bound, and free.
    weight: (e: QueuedEvent) => e.payload.length,
    maxWeight: options.maxBytes,
  });
  return { add: (event) => batch.add(event) };
}
