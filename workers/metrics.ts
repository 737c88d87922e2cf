// What a worker process exposes at GET /metrics: its throughput and failures, the journey
// engine's work, and the depth of every queue it serves (read from Redis at scrape time,
// bounded so that a Redis outage does not hang the scrape).
import http from 'node:http';
import type { Queue } from 'bullmq';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import { listen } from '../common/listen.ts';
import type { Logger } from '../common/logger.ts';
import { registerQueueDepth } from '../common/queue-depth.ts';

export interface WorkerMetrics {
  registry: Registry;
  events: Counter<'outcome'>;
  batchSize: Histogram;
  batches: Counter<'outcome'>;
  batchEvents: Histogram;
  storedLag: Histogram;
  journeyEntries: Counter;
  journeyMessages: Counter<'status'>;
  journeyTimers: Counter;
}

export function createWorkerMetrics(queues: Record<string, Pick<Queue, 'getJobCounts'>>): WorkerMetrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  registerQueueDepth(registry, queues, 1000);
  return {
    registry,
    events: new Counter({
      name: 'intake_worker_events_total',
      help: 'Track events handled by this worker: stored (now or before), retried (their batch attempt failed and will run again) or failed (refused for their data, or attempts exhausted: in the dead-letter queue)',
      labelNames: ['outcome'],
      registers,
    }),
    batchSize: new Histogram({
      name: 'intake_worker_insert_batch_size',
      help: 'Events stored per multi-row INSERT',
      buckets: [1, 2, 5, 10, 25, 50, 100, 200, 500, 1000],
      registers,
    }),
    batches: new Counter({
      name: 'intake_worker_batches_total',
      help: 'Track batch jobs finished by this worker: completed, retried (an attempt failed) or failed (attempts exhausted)',
      labelNames: ['outcome'],
      registers,
    }),
    batchEvents: new Histogram({
      name: 'intake_worker_batch_events',
      help: 'Events per Track batch job (one gateway group commit)',
      buckets: [1, 2, 5, 10, 25, 50, 100, 200, 500, 1000],
      registers,
    }),
    storedLag: new Histogram({
      name: 'intake_worker_stored_lag_seconds',
      help: "From an event's receipt by a gateway to its row committed (queue wait included)",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
      registers,
    }),
    journeyEntries: new Counter({ name: 'intake_journey_entries_total', help: 'Journey runs started', registers }),
    journeyMessages: new Counter({
      name: 'intake_journey_messages_total',
      help: 'Journey send steps, by what they did: queued or skipped',
      labelNames: ['status'],
      registers,
    }),
    journeyTimers: new Counter({ name: 'intake_journey_timers_total', help: 'Journey delays and wait timeouts that fired', registers }),
  };
}

/**
 * GET /metrics, GET /healthz (process up) and GET /readyz (PostgreSQL and Redis answer) on their own port. A taken port is not a reason to stop
 * persisting events: the worker logs it and runs without.
 */
export async function serveWorkerMetrics(
  registry: Registry,
  options: { port: number; host: string; log: Logger; ready: () => Promise<{ postgres: boolean; redis: boolean }> },
): Promise<{ port: number | null; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/metrics') {
      registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text),
        () => res.writeHead(500, { 'content-type': 'text/plain' }).end('Internal error'),
      );
    } else if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    } else if (req.method === 'GET' && req.url === '/readyz') {
      void options.ready().then(({ postgres, redis }) => {
        const ready = postgres && redis;
        res
          .writeHead(ready ? 200 : 503, { 'content-type': 'application/json' })
          .end(JSON.stringify({ status: ready ? 'ready' : 'unavailable', postgres, redis }));
      });
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
    }
  });
  const port = await listen(server, options.port, options.host).catch((err: Error) => {
    options.log.warn({ err: err.message, port: options.port }, 'worker metrics not served');
    return null;
  });
  if (port === null) return { port: null, close: async () => {} };
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
