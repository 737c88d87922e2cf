// The primary's side of a scrape: it asks every gateway process for its registry and adds them
// up with prom-client's AggregatorRegistry, each metric by its `aggregator` (counters and
// histograms summed, the queue depth read from Redis taken once, ...). prom-client's own
// clusterMetrics() asks every forked process, including one still starting that cannot answer
// yet, and its late answers can arrive after a timeout: here only processes that listen are asked,
// and one that exits meanwhile is left out rather than waited for.
import type { Worker } from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import type { MetricsJson, ToProcess } from './messages.ts';

/** How long the primary waits for each process's part (a part reads Redis for up to 1 s). */
export const PART_TIMEOUT_MS = 3000;

interface Part {
  worker: Worker;
  resolve(metrics: MetricsJson | null): void;
}

export interface MetricsCollector {
  /** Every listed process's metrics added up, as Prometheus text. Rejects when one of them does not answer in time. */
  collect(workers: Worker[]): Promise<string>;
  /** A process's part arrived. */
  received(id: number, metrics: MetricsJson): void;
  /** A process exited: what it owed is no longer waited for. */
  forget(worker: Worker): void;
}

export function createMetricsCollector(): MetricsCollector {
  const parts = new Map<number, Part>();
  let next = 0;

  const ask = (worker: Worker) =>
    new Promise<MetricsJson | null>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => {
        parts.delete(id);
        reject(new Error(`gateway process ${worker.process.pid} did not answer within ${PART_TIMEOUT_MS} ms`));
      }, PART_TIMEOUT_MS);
      parts.set(id, {
        worker,
        resolve: (metrics) => {
          clearTimeout(timer);
          parts.delete(id);
          resolve(metrics);
        },
      });
      const message: ToProcess = { type: 'intake:metrics-collect', id };
      // It may have exited since it was listed: then it owes nothing.
      worker.send(message, (err: Error | null) => err && parts.get(id)?.resolve(null));
    });

  return {
    async collect(workers) {
      const answers = await Promise.all(workers.map(ask));
      return AggregatorRegistry.aggregate(answers.filter((a) => a !== null)).metrics();
    },
    received: (id, metrics) => parts.get(id)?.resolve(metrics),
    forget(worker) {
      for (const part of parts.values()) if (part.worker === worker) part.resolve(null);
    },
  };
}
