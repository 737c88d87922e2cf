// Reading the events queue as the gateway writes it: batch jobs, each listing its events.
import type { JobType, Queue } from 'bullmq';
import { decodeTrack } from '../../events/track.ts';
import type { EventBatchJob, QueuedEvent } from '../../events/jobs.ts';
import { eventually } from './eventually.ts';
import { trackBody } from './http.ts';

const EVERY_STATE: JobType[] = ['waiting', 'active', 'delayed', 'prioritized', 'paused', 'completed', 'failed'];

/** The messageIds of one environment found in the queue's batch jobs (in the given states, every state by default). */
export async function queuedMessageIds(queue: Queue<EventBatchJob>, environmentId: string, states: JobType[] = EVERY_STATE): Promise<Set<string>> {
  const jobs = await queue.getJobs(states, 0, -1);
  return new Set(jobs.flatMap((j) => (j?.data?.events ?? []).filter((e) => e.environmentId === environmentId).map((e) => e.messageId)));
}

/** A Track event (the test body `trackBody` fills out) exactly as the gateway decodes and queues it. */
export function queuedEvent(environmentId: string, body: Record<string, unknown>, receivedAt = Date.now()): QueuedEvent {
  const decoded = decodeTrack(JSON.stringify(trackBody(body)));
  if (decoded.kind !== 'ok') throw new Error(`not a valid Track body: ${decoded.kind}`);
  return { environmentId, messageId: decoded.track.messageId, receivedAt, timestampMs: decoded.timestampMs, payload: decoded.storedPayload };
}

/** Until batch job `id` has completed: a completed batch leaves Redis at once (events/jobs.ts), so until it is gone. */
export function batchCompleted(queue: Queue<EventBatchJob>, id: string, timeoutMs = 30_000): Promise<boolean> {
  return eventually(async () => (await queue.getJob(id)) === undefined, { timeoutMs });
}

/** Whether the queue has nothing left to run: no batch waiting, active, delayed or paused. */
export async function nothingToRun(queue: Queue<EventBatchJob>): Promise<boolean> {
  const counts = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused');
  return Object.values(counts).every((n) => n === 0);
}
