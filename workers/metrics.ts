// What a worker process exposes at GET /metrics: its throughput and failures, how far behind
// it is (received-to-stored lag, age of the oldest event still queued), the journey engine's
// work, and the depth of every queue it serves (read from Redis at scrape time, bounded so
// that a Redis outage does not hang the scrape).
// Every labelled counter has each of its label values from the start, at zero: a series that
// appears only with its first occurrence has no rate() until its second, and an alert on it
// cannot fire on the first failure.
import http from 'node:http';
import type { Queue } from 'bullmq';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { SendVerdict } from '../journeys/send-gate.ts';
import type { StorageFigures } from './storage-maintenance.ts';
import { listen } from '../platform/listen.ts';
import type { Logger } from '../platform/logger.ts';
import { registerQueueDepth } from '../platform/queue-depth.ts';
import { EVENTS_QUEUE } from '../platform/queues.ts';
import { registerRedisMemory } from '../platform/redis-memory-gauges.ts';
import type { RedisMemory } from '../platform/redis-memory.ts';
import { withTimeout, type Readiness } from '../platform/with-timeout.ts';

/** `intake_worker_events_total{outcome}`. */
export const EVENT_OUTCOMES = ['stored', 'retried', 'failed', 'dropped'] as const;
/** `intake_worker_batches_total{outcome}`. */
export const BATCH_OUTCOMES = ['completed', 'retried', 'failed'] as const;
/** `intake_journey_messages_total{status}`: what the send gate decides (a new verdict fails to compile until it is listed). */
const SEND_STATUSES: Record<SendVerdict['status'], true> = { queued: true, skipped: true };
export const JOURNEY_MESSAGE_STATUSES = Object.keys(SEND_STATUSES) as SendVerdict['status'][];

/** A scrape never waits longer than this for Redis (the queue series are then left out). */
const QUEUE_SCRAPE_TIMEOUT_MS = 1000;

export interface WorkerMetricsDeps {
  /** The queues whose depths are exposed, by name. */
  queues: Record<string, Pick<Queue, 'getJobCounts'>>;
  /** Receipt time of the oldest event waiting in the events queue or being stored, null when none (workers/watermark.ts). */
  oldestQueuedReceipt: () => Promise<number | null>;
  /** Redis's memory, as last read (platform/redis-memory.ts); absent: no intake_redis_* series. */
  memory?: Pick<RedisMemory, 'reading' | 'full'>;
}

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
  /** Set from each storage maintenance round's figures (workers/storage-maintenance.ts). */
  storage: {
    set(figures: StorageFigures): void;
    rounds: Counter<'outcome'>;
  };
}

/** `intake_storage_maintenance_rounds_total{outcome}`. */
export const MAINTENANCE_OUTCOMES = ['completed', 'failed'] as const;

export function createWorkerMetrics(deps: WorkerMetricsDeps): WorkerMetrics {
  const registry = new Registry();
  const registers = [registry];
  collectDefaultMetrics({ register: registry });
  registerQueueDepth(registry, deps.queues, QUEUE_SCRAPE_TIMEOUT_MS);
  registerOldestEventAge(registry, deps.oldestQueuedReceipt);
  if (deps.memory) registerRedisMemory(registry, deps.memory);
  const metrics: WorkerMetrics = {
    registry,
    events: new Counter({
      name: 'intake_worker_events_total',
      help: 'Track events handled by this worker: stored (now or before), retried (their batch attempt failed and will run again) or failed (refused for their data, or attempts exhausted: in the dead-letter queue); dropped counts those an erasure or a suppression kept out (intake users), also counted as stored',
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
      help: "From an event's receipt by a gateway to its row committed (queue wait included; events refused to the dead-letter queue are not counted)",
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
    storage: registerStorage(registry),
  };
  for (const outcome of EVENT_OUTCOMES) metrics.events.labels({ outcome }).inc(0);
  for (const outcome of BATCH_OUTCOMES) metrics.batches.labels({ outcome }).inc(0);
  for (const status of JOURNEY_MESSAGE_STATUSES) metrics.journeyMessages.labels({ status }).inc(0);
  for (const outcome of MAINTENANCE_OUTCOMES) metrics.storage.rounds.labels({ outcome }).inc(0);
  return metrics;
}

/**
 * What is stored, as of the last storage maintenance round (every STORAGE_MAINTENANCE_MS):
 * absent until the first one. The oldest event's age is counted at scrape time from its
 * received time.
 */
function registerStorage(registry: Registry): WorkerMetrics['storage'] {
  const registers = [registry];
  let figures: StorageFigures | null = null;
  const partitions = new Gauge({ name: 'intake_events_partitions', help: 'Daily partitions of the events table', registers });
  const ahead = new Gauge({
    name: 'intake_events_partitions_ahead_days',
    help: 'Whole days after today (UTC) whose events partition exists, without a gap: below 1, an event received tomorrow would find no partition made ahead',
    registers,
  });
  const bytes = new Gauge({
    name: 'intake_storage_bytes',
    help: 'Bytes of each table on disk, with its indexes and TOAST (events: all its partitions)',
    labelNames: ['table'],
    registers,
  });
  new Gauge({
    name: 'intake_events_oldest_age_seconds',
    help: 'Seconds since the oldest stored event was received (what EVENTS_RETENTION_DAYS bounds); absent when no event is stored',
    registers,
    collect() {
      // A gauge without labels that is reset reads 0; removing its one series leaves it out.
      if (figures?.oldestEventAt == null) this.remove();
      else this.set(Math.max(0, (Date.now() - figures.oldestEventAt) / 1000));
    },
  });
  const rounds = new Counter({
    name: 'intake_storage_maintenance_rounds_total',
    help: 'Storage maintenance rounds of this worker: completed (whether this worker or another held the lock) or failed',
    labelNames: ['outcome'],
    registers,
  });
  return {
    rounds,
    set(next) {
      figures = next;
      partitions.set(next.partitions);
      ahead.set(next.partitionsAheadDays);
      for (const [table, n] of Object.entries(next.bytes)) bytes.set({ table }, n);
    },
  };
}

/**
 * `intake_queue_oldest_event_age_seconds{queue="events"}`: how long the oldest event not yet
 * stored has waited since a gateway received it (0 when none waits). A queue whose depth looks
 * fine can still hold one stuck batch; and while workers store nothing, the lag histogram
 * records nothing, but this keeps growing. Left out when Redis does not answer in time.
 */
function registerOldestEventAge(registry: Registry, oldestQueuedReceipt: () => Promise<number | null>): void {
  new Gauge({
    name: 'intake_queue_oldest_event_age_seconds',
    help: `Seconds since the receipt of the oldest Track event waiting in the events queue or being stored (0 when none; batches waiting for a retry are not counted); read from Redis when scraped, absent when Redis does not answer within ${QUEUE_SCRAPE_TIMEOUT_MS} ms`,
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const read = await withTimeout(oldestQueuedReceipt(), QUEUE_SCRAPE_TIMEOUT_MS, 'oldest queued event').then(
        (receipt) => ({ receipt }),
        () => null,
      );
      this.reset();
      if (read) this.set({ queue: EVENTS_QUEUE }, read.receipt === null ? 0 : Math.max(0, (Date.now() - read.receipt) / 1000));
    },
  });
}

/**
 * GET /metrics, GET /healthz (process up) and GET /readyz (PostgreSQL and Redis answer, Redis is not full) on their own port. A taken port
 * is not a reason to stop persisting events: the worker logs it and runs without.
 */
export async function serveWorkerMetrics(
  registry: Registry,
  options: { port: number; host: string; log: Logger; ready: () => Promise<Readiness> },
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
      void options.ready().then(({ ready, body }) => {
        res.writeHead(ready ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(body));
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
