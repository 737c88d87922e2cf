// Everything the gateway exposes at GET /metrics besides prom-client's process defaults.
// Values that live elsewhere (in-flight requests, refusals, queue depths) are read at scrape time.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Queue } from 'bullmq';
import { EVENTS_QUEUE } from '../../common/queues.ts';
import { registerQueueDepth } from '../../common/queue-depth.ts';
import type { OverloadGuard } from '../middleware/overload.ts';
import { createRequestHistogram } from './request-histogram.ts';

export interface GatewayMetrics {
  /** One answered request (any route, health probes included; `unmatched` for the plain-text 404). */
  observeRequest(route: string, status: number, seconds: number): void;
  /** One Track group-commit batch: how many events, and whether Redis stored them. */
  observeBatch(size: number, ok: boolean): void;
}

export interface GatewayMetricsDeps {
  registry: Registry;
  eventsQueue: Pick<Queue, 'getJobCounts'>;
  overload: Pick<OverloadGuard, 'inFlight' | 'refusals'>;
  /** A scrape never waits longer than this for Redis (the queue depths are then left out). */
  queueScrapeTimeoutMs: number;
}

export const METRIC_NAMES = {
  requests: 'intake_http_requests_total',
  duration: 'intake_http_request_duration_seconds',
  inFlight: 'intake_http_requests_in_flight',
  refusals: 'intake_http_overload_refusals_total',
  batchSize: 'intake_track_batch_size',
  /** The same series as a worker's (workers/metrics.ts), for the events queue. */
  queueJobs: 'intake_queue_jobs',
} as const;

/**
 * What each API route can answer: docs/openapi.yaml's statuses (test/gateway/metrics.test.ts
 * compares them) less 408 and 431, which Node's HTTP parser answers before any route matches.
 * Each has its request series from the start, at zero, so that a rate of 503s is 0 rather than
 * absent, and an alert on it can fire on the first ones.
 */
export const ROUTE_STATUSES: Record<'track' | 'identify' | 'profiles', readonly number[]> = {
  track: [202, 400, 401, 403, 404, 413, 429, 500, 503],
  identify: [200, 400, 401, 403, 404, 409, 413, 429, 500],
  profiles: [200, 400, 401, 403, 404, 429, 500],
};

export function createGatewayMetrics(deps: GatewayMetricsDeps): GatewayMetrics {
  const { registry, eventsQueue, overload, queueScrapeTimeoutMs } = deps;
  const registers = [registry];
  const requests = createRequestHistogram(registry, { count: METRIC_NAMES.requests, duration: METRIC_NAMES.duration });
  for (const [route, statuses] of Object.entries(ROUTE_STATUSES)) for (const status of statuses) requests.zero(route, status);

  new Gauge({
    name: METRIC_NAMES.inFlight,
    help: 'Identify, Track and Profiles requests being handled now (bounded by MAX_IN_FLIGHT)',
    registers,
    collect() {
      this.set(overload.inFlight());
    },
  });
  new Counter({
    name: METRIC_NAMES.refusals,
    help: 'Requests refused with 429 because MAX_IN_FLIGHT requests were already in hand',
    registers,
    collect() {
      this.reset();
      this.inc(overload.refusals());
    },
  });
  const batchSize = new Histogram({
    name: METRIC_NAMES.batchSize,
    help: 'Track events written to Redis per group-commit transaction, by outcome (stored, failed)',
    labelNames: ['outcome'],
    buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024],
    registers,
  });
  registerQueueDepth(registry, { [EVENTS_QUEUE]: eventsQueue }, queueScrapeTimeoutMs);

  // Both series exist from the start, so a rate of failed batches is 0 rather than absent.
  batchSize.zero({ outcome: 'stored' });
  batchSize.zero({ outcome: 'failed' });
  const stored = batchSize.labels('stored');
  const failed = batchSize.labels('failed');
  return {
    observeRequest: requests.observe,
    observeBatch: (size, ok) => (ok ? stored : failed).observe(size),
  };
}
