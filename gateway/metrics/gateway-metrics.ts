// Everything the gateway exposes at GET /metrics besides prom-client's process defaults.
// Values that live elsewhere (slots held, refusals, cut uploads, queue depths) are read at scrape time.
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Queue } from 'bullmq';
import { EVENTS_QUEUE } from '../../platform/queues.ts';
import { registerQueueDepth } from '../../platform/queue-depth.ts';
import { REFUSAL_REASONS, type Admission } from '../admission.ts';
import type { UploadWatch } from '../upload-watch.ts';
import { registerRedisMemory } from '../../platform/redis-memory-gauges.ts';
import type { RedisMemory } from '../../platform/redis-memory.ts';
import type { ReadRoute } from '../../platform/read-replica.ts';
import type { EventBatcher } from '../event-batcher.ts';
import { createRequestHistogram } from './request-histogram.ts';

export interface GatewayMetrics {
  /** One answered request (any route, health probes included; `unmatched` for the plain-text 404). */
  observeRequest(route: string, status: number, seconds: number): void;
  /** One Track group-commit batch: how many events, and whether Redis stored them. */
  observeBatch(size: number, ok: boolean): void;
  /** Requests answered so far by route and status, read when the live view's rates are written. */
  requestTotals(): { route: string; status: string; count: number }[];
  /** Calls of suppressed users answered and stored nowhere (gateway/suppressions.ts). */
  suppressed: Counter<'api' | 'environment'>;
}

export interface GatewayMetricsDeps {
  registry: Registry;
  eventsQueue: Pick<Queue, 'getJobCounts'>;
  admission: Pick<Admission, 'inFlightCount' | 'uploadCount' | 'refusals'>;
  uploadWatch: Pick<UploadWatch, 'cuts'>;
  /** Redis's memory, as last read (platform/redis-memory.ts). */
  memory: Pick<RedisMemory, 'reading' | 'full'>;
  /** A scrape never waits longer than this for Redis (the queue depths are then left out). */
  queueScrapeTimeoutMs: number;
  /** Where Profiles reads go (DATABASE_READ_URL): its lag and whether the replica is in use. */
  readRoute?: Pick<ReadRoute, 'lagSeconds' | 'usingReplica'>;
  /** The events queue's partitions in and out of Track's rotation (event-batcher.ts). */
  partitions?: EventBatcher['partitions'];
}

export const METRIC_NAMES = {
  requests: 'intake_http_requests_total',
  duration: 'intake_http_request_duration_seconds',
  inFlight: 'intake_http_requests_in_flight',
  uploads: 'intake_http_uploads_in_progress',
  refusals: 'intake_http_overload_refusals_total',
  uploadsCut: 'intake_http_uploads_cut_total',
  batchSize: 'intake_track_batch_size',
  suppressed: 'intake_suppressed_calls_total',
  /** The same series as a worker's (workers/metrics.ts), for the events queue. */
  queueJobs: 'intake_queue_jobs',
  partitionInRotation: 'intake_queue_partition_in_rotation',
  partitionRemovals: 'intake_queue_partition_removals_total',
  partitionReturns: 'intake_queue_partition_returns_total',
} as const;

/**
 * What each API route can answer: docs/openapi.yaml's statuses (test/gateway/metrics.test.ts
 * compares them) less 417 and 431, which Node's HTTP server answers before any route matches
 * (Track's and Identify's 408 is a route's too: a body that arrived too slowly).
 * Each has its request series from the start, at zero, so that a rate of 503s is 0 rather than
 * absent, and an alert on it can fire on the first ones.
 */
export const ROUTE_STATUSES: Record<'track' | 'identify' | 'profiles', readonly number[]> = {
  track: [202, 400, 401, 403, 404, 408, 413, 429, 500, 503],
  identify: [200, 400, 401, 403, 404, 408, 409, 413, 429, 500],
  profiles: [200, 400, 401, 403, 404, 429, 500],
};

export function createGatewayMetrics(deps: GatewayMetricsDeps): GatewayMetrics {
  const { registry, eventsQueue, admission, uploadWatch, memory, queueScrapeTimeoutMs } = deps;
  const registers = [registry];
  const requests = createRequestHistogram(registry, { count: METRIC_NAMES.requests, duration: METRIC_NAMES.duration });
  for (const [route, statuses] of Object.entries(ROUTE_STATUSES)) for (const status of statuses) requests.zero(route, status);

  new Gauge({
    name: METRIC_NAMES.inFlight,
    help: 'Identify, Track and Profiles requests being handled now, their bodies read (bounded by MAX_IN_FLIGHT, and per environment by MAX_IN_FLIGHT_PER_ENVIRONMENT)',
    registers,
    collect() {
      this.set(admission.inFlightCount());
    },
  });
  new Gauge({
    name: METRIC_NAMES.uploads,
    help: 'Track and Identify bodies being read that did not arrive with their headers (bounded by MAX_UPLOADS, and per environment by MAX_UPLOADS_PER_ENVIRONMENT)',
    registers,
    collect() {
      this.set(admission.uploadCount());
    },
  });
  new Counter({
    name: METRIC_NAMES.refusals,
    help: 'Requests refused with 429, by the bound that refused them: in_flight (MAX_IN_FLIGHT), in_flight_environment (MAX_IN_FLIGHT_PER_ENVIRONMENT, or the fair share of MAX_IN_FLIGHT), uploads (MAX_UPLOADS), uploads_environment (MAX_UPLOADS_PER_ENVIRONMENT, the fair share of MAX_UPLOADS, or an upload taken back for an environment holding fewer)',
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      for (const reason of REFUSAL_REASONS) this.labels(reason).inc(admission.refusals(reason));
    },
  });
  new Counter({
    name: METRIC_NAMES.uploadsCut,
    help: 'Bodies cut with 408 for arriving too slowly (BODY_TIMEOUT_MS, BODY_MIN_BYTES_PER_SECOND)',
    registers,
    collect() {
      this.reset();
      this.inc(uploadWatch.cuts());
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
  registerRedisMemory(registry, memory);
  if (deps.readRoute) registerReadReplica(registry, deps.readRoute);
  if (deps.partitions) registerPartitions(registry, deps.partitions);

  // Both series exist from the start, so a rate of failed batches is 0 rather than absent.
  batchSize.zero({ outcome: 'stored' });
  batchSize.zero({ outcome: 'failed' });
  const stored = batchSize.labels('stored');
  const failed = batchSize.labels('failed');
  const suppressed = new Counter({
    name: METRIC_NAMES.suppressed,
    help: 'Identify and Track calls of suppressed user IDs (intake users suppress) this gateway answered and stored nowhere, by api and environment (path value)',
    labelNames: ['api', 'environment'],
    registers,
  });
  return {
    suppressed,
    observeRequest: requests.observe,
    observeBatch: (size, ok) => (ok ? stored : failed).observe(size),
    requestTotals: requests.totals,
  };
}

/**
 * How far the read replica trailed the primary at its last reading (absent without
 * DATABASE_READ_URL, while the replica does not answer, or while that is not known) and whether
 * Profiles reads go to it. Every process of a gateway reads the same replica: their scrape takes
 * the largest lag and the smallest "in use".
 */
function registerReadReplica(registry: Registry, route: Pick<ReadRoute, 'lagSeconds' | 'usingReplica'>): void {
  new Gauge({
    name: 'intake_read_replica_lag_seconds',
    help: 'How far the PostgreSQL read replica (DATABASE_READ_URL) trailed the primary at its last reading, read once a second: 0 when it had replayed all the primary had written; absent when there is none, it does not answer, or how far it trails is not known',
    registers: [registry],
    aggregator: 'max',
    collect() {
      const lag = route.lagSeconds();
      // A gauge without labels that is reset reads 0; removing its one series leaves it out.
      if (lag === null) this.remove();
      else this.set(lag);
    },
  });
  new Gauge({
    name: 'intake_read_replica_in_use',
    help: 'Whether Profiles reads go to the read replica (1) or to the primary (0: none configured, down, or lagging more than READ_REPLICA_MAX_LAG_MS)',
    registers: [registry],
    aggregator: 'min',
    collect() {
      this.set(route.usingReplica() ? 1 : 0);
    },
  });
}

/**
 * Each partition of the events queue, in Track's rotation or out of it, and how often it left and
 * came back (gateway/event-batcher.ts), read at scrape time. Each process of a gateway keeps its
 * own rotation: their scrape says 0 while any of them has the partition out, and adds the counts up.
 */
function registerPartitions(registry: Registry, partitions: EventBatcher['partitions']): void {
  new Gauge({
    name: METRIC_NAMES.partitionInRotation,
    help: 'Whether Track batches go to this partition of the events queue (1), or it is out of the rotation until a probe confirms a write on it (0): its master could not confirm a batch (replicas not acknowledging within the bound, failing over, unreachable)',
    labelNames: ['partition'],
    registers: [registry],
    aggregator: 'min',
    collect() {
      for (const p of partitions()) this.labels(p.name).set(p.rotation === 'in' ? 1 : 0);
    },
  });
  new Counter({
    name: METRIC_NAMES.partitionRemovals,
    help: 'Times a partition of the events queue was taken out of the rotation by a batch it could not confirm',
    labelNames: ['partition'],
    registers: [registry],
    collect() {
      this.reset();
      for (const p of partitions()) this.labels(p.name).inc(p.removals);
    },
  });
  new Counter({
    name: METRIC_NAMES.partitionReturns,
    help: 'Times a partition of the events queue came back into the rotation after a probe write on it was confirmed',
    labelNames: ['partition'],
    registers: [registry],
    collect() {
      this.reset();
      for (const p of partitions()) this.labels(p.name).inc(p.returns);
    },
  });
}
