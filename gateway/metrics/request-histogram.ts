// Request count and latency by route and status, recorded without allocating per request:
// prom-client's labelled metrics build a label-key string on every observation (~0.5 µs and
// garbage on Track's hot path). Here each route and status has one cell, made on first use,
// and the registry reads the cells out only when /metrics is scraped.
import type { Metric, Registry } from 'prom-client';

/** Seconds; request latencies here run from well under a millisecond to the 30 s request timeout. */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

interface Cell {
  labels: { route: string; status: string };
  count: number;
  sum: number;
  /** Observations per bucket (not cumulative); one more slot for +Inf. */
  buckets: Float64Array;
}

interface Sample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

export interface RequestHistogram {
  observe(route: string, status: number, seconds: number): void;
  /** Makes the route and status's series exist, at zero, before its first request. */
  zero(route: string, status: number): void;
  /** Requests answered so far per route and status (the live view's rates take differences of these). */
  totals(): { route: string; status: string; count: number }[];
}

export function createRequestHistogram(registry: Registry, names: { count: string; duration: string }): RequestHistogram {
  const byRoute = new Map<string, Map<number, Cell>>();
  const cells: Cell[] = [];

  const cellFor = (route: string, status: number): Cell => {
    let byStatus = byRoute.get(route);
    if (byStatus === undefined) byRoute.set(route, (byStatus = new Map()));
    let cell = byStatus.get(status);
    if (cell === undefined) {
      cell = { labels: { route, status: String(status) }, count: 0, sum: 0, buckets: new Float64Array(LATENCY_BUCKETS.length + 1) };
      byStatus.set(status, cell);
      cells.push(cell);
    }
    return cell;
  };

  // The shape prom-client's Registry reads from a metric (name, help, type, aggregator, get,
  // reset): prom-client's one internal this relies on, pinned by test/unit/request-histogram.test.ts
  // (the same text and aggregation as its own Counter and Histogram).
  const exported = (name: string, help: string, type: 'counter' | 'histogram', values: () => Sample[]) => ({
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, values: values(), aggregator: 'sum' }),
    reset() {
      for (const cell of cells) {
        cell.count = cell.sum = 0;
        cell.buckets.fill(0);
      }
    },
  });

  const counts = exported(names.count, 'HTTP requests answered, by route name and status', 'counter', () =>
    cells.map((cell) => ({ labels: cell.labels, value: cell.count })),
  );
  const durations = exported(names.duration, 'HTTP request latency in seconds, by route name and status', 'histogram', () =>
    cells.flatMap((cell) => {
      const samples: Sample[] = [];
      let cumulative = 0;
      for (let i = 0; i <= LATENCY_BUCKETS.length; i++) {
        cumulative += cell.buckets[i];
        samples.push({
          labels: { ...cell.labels, le: i < LATENCY_BUCKETS.length ? LATENCY_BUCKETS[i] : '+Inf' },
          value: cumulative,
          metricName: `${names.duration}_bucket`,
        });
      }
      samples.push({ labels: cell.labels, value: cell.sum, metricName: `${names.duration}_sum` });
      samples.push({ labels: cell.labels, value: cell.count, metricName: `${names.duration}_count` });
      return samples;
    }),
  );
  registry.registerMetric(counts as unknown as Metric);
  registry.registerMetric(durations as unknown as Metric);

  return {
    zero(route, status) {
      cellFor(route, status);
    },
    totals: () => cells.map((cell) => ({ route: cell.labels.route, status: cell.labels.status, count: cell.count })),
    observe(route, status, seconds) {
      const cell = cellFor(route, status);
      cell.count++;
      cell.sum += seconds;
      let i = 0;
      while (i < LATENCY_BUCKETS.length && seconds > LATENCY_BUCKETS[i]) i++;
      cell.buckets[i]++;
    },
  };
}
