// Reading the events queue as the gateway writes it: batch jobs, each listing its events.
import type { JobType, Queue } from 'bullmq';
import type { EventBatchJob } from '../../common/queues.ts';

const EVERY_STATE: JobType[] = ['waiting', 'active', 'delayed', 'prioritized', 'paused', 'completed', 'failed'];

/** The messageIds of one environment found in the queue's batch jobs (in the given states, every state by default). */
export async function queuedMessageIds(queue: Queue<EventBatchJob>, environmentId: string, states: JobType[] = EVERY_STATE): Promise<Set<string>> {
  const jobs = await queue.getJobs(states, 0, -1);
  return new Set(jobs.flatMap((j) => (j?.data?.events ?? []).filter((e) => e.environmentId === environmentId).map((e) => e.messageId)));
}
