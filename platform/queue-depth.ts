// The `intake_queue_jobs{queue,state}` gauge that gateways and workers both expose: read from
// Redis when scraped, and left out (not stale) when Redis does not answer within the bound,
// so /metrics answers during an outage.
import type { Queue } from 'bullmq';
import { Gauge, type Registry } from 'prom-client';
import { withTimeout } from './with-timeout.ts';

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'] as const;

export function registerQueueDepth(registry: Registry, queues: Record<string, Pick<Queue, 'getJobCounts'>>, timeoutMs: number): void {
  new Gauge({
    name: 'intake_queue_jobs',
    help: `Jobs per queue and state, read from Redis when scraped (absent when Redis does not answer within ${timeoutMs} ms)`,
    labelNames: ['queue', 'state'],
    registers: [registry],
    // Every process of a multi-process gateway reads the same Redis: a sum over them would
    // multiply the depth, so their scrape takes one reading (gateway/cluster/collect-metrics.ts).
    aggregator: 'first',
    async collect() {
      const read = await Promise.all(
        Object.entries(queues).map(async ([name, queue]) => ({
          name,
          counts: await withTimeout(queue.getJobCounts(...JOB_STATES), timeoutMs, 'queue counts').catch(() => null),
        })),
      );
      this.reset();
      for (const { name, counts } of read) if (counts) for (const state of JOB_STATES) this.set({ queue: name, state }, counts[state] ?? 0);
    },
  });
}
