// A real Prometheus (the server of Debian's `prometheus` package, on 127.0.0.1, its data in a
// temporary folder) scrapes a real gateway and a real worker under a little load with the
// shipped configuration (only its service discovery replaced by this machine's ports) and alert
// rules. Every PromQL expression of the Grafana dashboard and of the alert rules goes through
// its HTTP API: each parses and returns series. Every metric name they use is in the gateway's
// or the worker's /metrics.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { stringify } from 'yaml';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import {
  alertExpressions,
  alertRules,
  asVerdicts,
  dashboardExpressions,
  exposedNames,
  metricNames,
  prometheusConfigFor,
  withGrafanaVariables,
  type Expression,
} from '../helpers/observability.ts';
import { spawnIntake, type Child } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness } from '../helpers/services.ts';
import { freePort } from '../helpers/free-port.ts';

/** Scrape and rule evaluation interval here: rates have their two samples within seconds. */
const INTERVAL = '1s';
/** What Grafana puts in $__rate_interval for a 1 s scrape interval is 4 s; a little more spans scrapes delayed by a loaded machine. */
const RATE_INTERVAL = '10s';

let h: Harness;
let gateway: Child;
let worker: Child;
let workerMetrics: string;
let prometheus: { url: string; process: ChildProcess; output(): string } | undefined;
let dataDir: string;
let stopLoad = false;
let load: Promise<void>;

async function startPrometheus(config: Record<string, unknown>) {
  const port = await freePort();
  const configFile = path.join(dataDir, 'prometheus.yml');
  writeFileSync(configFile, stringify(config));
  const child = spawn(
    'prometheus',
    [`--config.file=${configFile}`, `--storage.tsdb.path=${path.join(dataDir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c));
  child.stderr!.on('data', (c: Buffer) => (out += c));
  const failed = new Promise<never>((_, reject) => {
    child.once('error', (err) => reject(new Error(`prometheus did not start (install Debian's \`prometheus\` package; .ci/run does): ${err.message}`)));
    child.once('exit', (code) => reject(new Error(`prometheus exited (${code}):\n${out}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const ready = eventually(async () => (await fetch(`${url}/-/ready`)).ok, { timeoutMs: 30_000, intervalMs: 200 });
  prometheus = { url, process: child, output: () => out };
  if (!(await Promise.race([ready, failed]))) throw new Error(`prometheus not ready:\n${out}`);
}

/** GET /api/v1/query at the current time: the API's own status, and the series returned. */
async function query(expr: string): Promise<{ status: string; error?: string; series: number }> {
  const res = await fetch(`${prometheus!.url}/api/v1/query?${new URLSearchParams({ query: expr })}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  return { status: body.status, error: body.error, series: body.data?.result.length ?? 0 };
}

/** A little traffic on both API routes the dashboard shows, with some refusals, until the tests end. */
async function generateLoad(url: string, tenant: { slug: string; key: string }) {
  const auth = { 'x-api-key': tenant.key };
  for (let i = 0; !stopLoad; i++) {
    await Promise.all([
      request(url, `/api/track/${tenant.slug}`, { headers: auth, body: trackBody() }),
      request(url, `/api/identify/${tenant.slug}`, { headers: auth, body: { userId: `u-${i % 7}`, traits: { n: i } } }),
      i % 5 === 0 ? request(url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': 'itk_wrong' }, body: trackBody() }) : null,
    ]).catch(() => {});
    await sleep(100);
  }
}

test.before(async () => {
  h = await openHarness();
  [gateway, worker] = await Promise.all([spawnIntake('gateway', h.env), spawnIntake('worker', h.env)]);
  workerMetrics = `http://127.0.0.1:${/"metricsPort":(\d+)/.exec(worker.output())![1]}`;
  const tenant = await newTenant(h);
  load = generateLoad(gateway.url, tenant);
  dataDir = mkdtempSync(path.join(tmpdir(), 'prometheus-'));
  const hostPort = (url: string) => new URL(url).host;
  await startPrometheus(prometheusConfigFor({ gateway: [hostPort(gateway.url)], worker: [hostPort(workerMetrics)] }, INTERVAL));
});

test.after.always(async () => {
  stopLoad = true;
  await load;
  if (prometheus && prometheus.process.exitCode === null) {
    const exited = new Promise((resolve) => prometheus!.process.once('exit', resolve));
    prometheus.process.kill('SIGTERM');
    await exited;
  }
  await Promise.all([gateway?.kill('SIGTERM'), worker?.kill('SIGTERM')]);
  await closeEmptied(h);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

test.serial('Prometheus scrapes the gateway and the worker with the shipped configuration', async (t) => {
  const up = await eventually(async () => {
    const res = (await (await fetch(`${prometheus!.url}/api/v1/targets`)).json()) as {
      data: { activeTargets: { labels: { job: string }; health: string; lastError: string }[] };
    };
    const targets = res.data.activeTargets;
    return targets.length === 2 && targets.every((target) => target.health === 'up') ? targets : null;
  });
  t.truthy(up, prometheus!.output());
  t.deepEqual(up!.map((target) => target.labels.job).sort(), ['gateway', 'worker']);
  t.is((await query('sum(up{job=~"gateway|worker"})')).series, 1);
});

test.serial('every expression of the dashboard and of the alert rules parses and returns series', async (t) => {
  const expressions: Expression[] = [
    ...dashboardExpressions().map(({ source, expr }) => ({ source, expr: withGrafanaVariables(expr, RATE_INTERVAL) })),
    // An alert's condition filters out every series of a healthy system: its verdicts (`bool`) show it finds them.
    ...alertExpressions().map(({ source, expr }) => ({ source: `${source} (verdicts)`, expr: asVerdicts(expr) })),
  ];
  t.true(expressions.length >= 30);
  // The alerts' own expressions parse as written (they may well return nothing here).
  for (const { source, expr } of alertExpressions()) t.is((await query(expr)).status, 'success', source);

  const results = async () => Promise.all(expressions.map(async (e) => ({ ...e, ...(await query(e.expr)) })));
  // Rates need two scrapes and the load's first batches to be stored: wait until every one has series.
  let last = await results();
  await eventually(
    async () => {
      last = await results();
      return last.every((r) => r.status === 'success' && r.series > 0);
    },
    { timeoutMs: 60_000, intervalMs: 1000 },
  );
  for (const r of last) {
    t.is(r.status, 'success', `${r.source}: ${r.error ?? ''}\n${r.expr}`);
    t.true(r.series > 0, `${r.source} returns no series:\n${r.expr}`);
  }
});

test.serial('Prometheus loads the shipped alert rules and evaluates each without error', async (t) => {
  const rules = await eventually(async () => {
    const res = (await (await fetch(`${prometheus!.url}/api/v1/rules`)).json()) as {
      data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
    };
    const all = res.data.groups.flatMap((g) => g.rules);
    return all.length > 0 && all.every((r) => r.health === 'ok') ? all : null;
  });
  t.truthy(rules, 'every rule evaluated with health ok');
  t.deepEqual(
    rules!.map((r) => r.name).sort(),
    alertRules()
      .map((r) => r.alert)
      .sort(),
  );
});

test("every metric name the dashboard and the alert rules use is in a real gateway's or worker's /metrics", async (t) => {
  const gatewayNames = exposedNames((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  const workerNames = exposedNames((await request(workerMetrics, '/metrics', { method: 'GET' })).text);
  const used = new Set([...dashboardExpressions(), ...alertExpressions()].flatMap(({ expr }) => metricNames(expr)));
  t.true(used.size >= 12, [...used].join(' '));
  // `up` is Prometheus's own series for each scrape.
  used.delete('up');
  for (const name of used) t.true(gatewayNames.has(name) || workerNames.has(name), `${name} is exposed by no gateway or worker`);
  // Each side's own series come from that side.
  t.true(gatewayNames.has('intake_http_requests_total') && !workerNames.has('intake_http_requests_total'));
  t.true(workerNames.has('intake_queue_oldest_event_age_seconds') && workerNames.has('intake_worker_stored_lag_seconds_bucket'));
});
