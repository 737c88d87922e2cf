// gateway/metrics/request-histogram.ts hands prom-client's Registry objects of the shape it
// reads from a metric (name, help, type, aggregator, get, reset) instead of prom-client's own
// Counter and Histogram, which build a label key per observation. This pins that reliance: the
// exposition text and the cluster aggregation must equal what prom-client's own metrics give
// for the same observations, so a prom-client that reads metrics differently fails here.
import test from 'ava';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { createRequestHistogram, LATENCY_BUCKETS } from '../../gateway/metrics/request-histogram.ts';

const NAMES = { count: 'http_requests_total', duration: 'http_request_duration_seconds' };
const OBSERVATIONS: [string, number, number][] = [
  ['track', 202, 0.0004],
  ['track', 202, 0.003],
  ['identify', 200, 0.02],
  ['track', 503, 1.2],
  ['profiles', 404, 45],
  ['identify', 200, 0.001],
];

function ours() {
  const registry = new Registry();
  const histogram = createRequestHistogram(registry, NAMES);
  for (const [route, status, seconds] of OBSERVATIONS) histogram.observe(route, status, seconds);
  return registry;
}

function promClients() {
  const registry = new Registry();
  const counts = new Counter({
    name: NAMES.count,
    help: 'HTTP requests answered, by route name and status',
    labelNames: ['route', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: NAMES.duration,
    help: 'HTTP request latency in seconds, by route name and status',
    labelNames: ['route', 'status'],
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  for (const [route, status, seconds] of OBSERVATIONS) {
    counts.inc({ route, status: String(status) });
    durations.observe({ route, status: String(status) }, seconds);
  }
  return registry;
}

/** The exposition text with each series' labels in name order (the order of labels carries no meaning). */
const sortedLabels = (text: string) => text.replace(/\{([^}]*)\}/g, (_, labels: string) => `{${labels.split(',').sort().join(',')}}`);

test("the exposition text is prom-client's own for the same observations", async (t) => {
  t.is(sortedLabels(await ours().metrics()), sortedLabels(await promClients().metrics()));
});

test("several processes' metrics add up as prom-client's own do", async (t) => {
  const json = async (r: Registry) => r.getMetricsAsJSON();
  const mine = AggregatorRegistry.aggregate([await json(ours()), await json(ours())]);
  const theirs = AggregatorRegistry.aggregate([await json(promClients()), await json(promClients())]);
  t.is(sortedLabels(await mine.metrics()), sortedLabels(await theirs.metrics()));
});

test("reset zeroes every cell, as prom-client's reset does", async (t) => {
  const registry = ours();
  registry.resetMetrics();
  const reference = promClients();
  reference.resetMetrics();
  // prom-client forgets its label sets on reset; the cells stay, at zero.
  t.notRegex(await registry.metrics(), /http_requests_total\{[^}]*\} [1-9]/);
  t.is(
    await reference.metrics(),
    `# HELP ${NAMES.count} HTTP requests answered, by route name and status\n# TYPE ${NAMES.count} counter\n\n# HELP ${NAMES.duration} HTTP request latency in seconds, by route name and status\n# TYPE ${NAMES.duration} histogram\n`,
  );
});
