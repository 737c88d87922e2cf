// The observability pack (deploy/observability/, the compose `observability` profile) checked
// without Docker: Prometheus's configuration and alert rules pass promtool (Debian's `prometheus`
// package; .ci/run installs it), each alert fires in promtool's unit tests as intended, and the
// Grafana dashboard parses and names only what the provisioning defines. Compose wires the files
// where the configurations expect them. test/ops/prometheus.test.ts runs every expression on a
// real Prometheus scraping a real gateway and worker.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { parse } from 'yaml';
import { loadConfig } from '../../platform/config.ts';
import {
  ALERT_RULES,
  alertExpressions,
  alertRules,
  allPanels,
  asVerdicts,
  DASHBOARD,
  DASHBOARD_PROVIDERS,
  dashboardExpressions,
  DATASOURCES,
  metricNames,
  PROMETHEUS_CONFIG,
  readDashboard,
  readYaml,
  root,
} from '../helpers/observability.ts';

const compose = parse(readFileSync(path.join(root, 'docker-compose.yml'), 'utf8'), { merge: true });
const services: Record<string, any> = compose.services;

function promtool(...args: string[]): Promise<{ code: number; out: string }> {
  return new Promise((resolve, reject) =>
    execFile('promtool', args, { cwd: root, timeout: 60_000 }, (err, stdout, stderr) => {
      if ((err as NodeJS.ErrnoException | null)?.code === 'ENOENT') {
        reject(new Error("promtool not found: install Debian's `prometheus` package (`bash .ci/run` does)"));
      } else resolve({ code: err ? Number(err.code) : 0, out: stdout + stderr });
    }),
  );
}

test('promtool check config: the shipped prometheus.yml and the rule file it loads are valid', async (t) => {
  const { code, out } = await promtool('check', 'config', PROMETHEUS_CONFIG);
  t.is(code, 0, out);
  t.regex(out, /SUCCESS: 1 rule files found/);
  t.regex(out, new RegExp(`SUCCESS: ${alertRules().length} rules found`));
});

test('promtool check rules passes the alert rules and fails a broken copy (the check can fail)', async (t) => {
  const ok = await promtool('check', 'rules', ALERT_RULES);
  t.is(ok.code, 0, ok.out);
  const dir = mkdtempSync(path.join(tmpdir(), 'alerts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const broken = path.join(dir, 'alerts.yml');
  writeFileSync(broken, readFileSync(ALERT_RULES, 'utf8').replace('up{job="gateway"} == 0', 'up{job="gateway"} == == 0'));
  const bad = await promtool('check', 'rules', broken);
  t.is(bad.code, 1, bad.out);
  t.regex(bad.out, /parse error/);
});

test('promtool test rules: each alert fires in its situation after its `for:`, with its annotations, and not in a healthy one', async (t) => {
  const { code, out } = await promtool('test', 'rules', 'test/ops/alerts.promtool.yml');
  t.is(code, 0, out);
  t.regex(out, /SUCCESS/);
  // Every alert is exercised there.
  const tests = readFileSync(path.join(root, 'test/ops/alerts.promtool.yml'), 'utf8');
  for (const rule of alertRules()) t.regex(tests, new RegExp(`alertname: ${rule.alert}\\n`), rule.alert);
});

test('every alert waits (`for:`), has a severity and says what happened and what to do', (t) => {
  const rules = alertRules();
  t.deepEqual(rules.map((r) => r.alert).sort(), [
    'IntakeDeadLetters',
    'IntakeEventPartitionsNotAhead',
    'IntakeEventsQueueGrowing',
    'IntakeEventsWaitingTooLong',
    'IntakeGatewayDown',
    'IntakeNoGateway',
    'IntakeNoWorker',
    'IntakeRedisFull',
    'IntakeServerErrors',
    'IntakeStoredLagHigh',
    'IntakeUnavailableAnswers',
    'IntakeWorkerDown',
    'IntakeWorkerNotConsuming',
  ]);
  for (const rule of rules) {
    t.regex(rule.for ?? '', /^\d+m$/, rule.alert);
    t.true(['warning', 'critical'].includes(rule.labels?.severity ?? ''), rule.alert);
    t.truthy(rule.annotations?.summary, rule.alert);
    t.truthy(rule.annotations?.description, rule.alert);
  }
});

test('the PromQL helpers find metric names and turn conditions into verdicts', (t) => {
  t.deepEqual(metricNames('histogram_quantile(0.99, sum by (le, status) (rate(intake_x_bucket{route="track",a!~"b"}[5m]))) > 30'), ['intake_x_bucket']);
  t.deepEqual(metricNames('(sum(up{job="gateway"}) or vector(0)) == 0'), ['up']);
  t.deepEqual(metricNames('max(a) > 1e3 and max(deriv(b[10m] offset 5m)) > 0'), ['a', 'b']);
  t.deepEqual(metricNames('sum(rate(a_sum[1m])) / on (x) group_left (y) sum(rate(a_count[1m]))'), ['a_sum', 'a_count']);
  t.is(asVerdicts('up{job!="gateway"} == 0'), 'up{job!="gateway"} == bool 0');
  t.is(asVerdicts('max(a{b=~"c|d"}) > 100 and max(e) > 0'), 'max(a{b=~"c|d"}) > bool 100 and max(e) > bool 0');
  t.is(asVerdicts('x >= bool 1'), 'x >= bool 1');
  t.is(asVerdicts('sum(x)'), 'sum(x)');
});

test('the dashboard JSON parses and names only the provisioned datasource, core panel types and built-in variables', (t) => {
  const dashboard = readDashboard();
  t.is(dashboard.uid, 'intake');
  const datasources: { uid: string; type: string; url: string }[] = readYaml(DATASOURCES).datasources;
  const provisioned = new Set(datasources.map((d) => `${d.type}/${d.uid}`));
  const panels = allPanels(dashboard.panels);
  t.is(new Set(panels.map((p) => p.id)).size, panels.length, 'panel ids are unique');
  // Grafana's built-in panel types: nothing that needs a plugin installed.
  const core = new Set(['row', 'timeseries', 'stat', 'gauge', 'bargauge', 'table', 'text', 'heatmap', 'state-timeline']);
  for (const panel of panels) {
    t.true(core.has(panel.type), `${panel.title}: ${panel.type}`);
    t.true(panel.gridPos.x + panel.gridPos.w <= 24, `${panel.title} fits the 24-column grid`);
    if (panel.type === 'row') continue;
    t.true(provisioned.has(`${panel.datasource?.type}/${panel.datasource?.uid}`), `${panel.title}: datasource ${JSON.stringify(panel.datasource)}`);
    t.true((panel.targets ?? []).length > 0, `${panel.title} has queries`);
    for (const target of panel.targets ?? []) {
      t.true(provisioned.has(`${target.datasource?.type}/${target.datasource?.uid}`), `${panel.title} ${target.refId}`);
      t.true(target.expr.trim().length > 0);
    }
  }
  // No dashboard variables: the only `$` are Grafana's built-in intervals.
  for (const { source, expr } of dashboardExpressions()) t.notRegex(expr.replace(/\$__(rate_)?interval\b/g, ''), /\$/, source);
  t.notRegex(readFileSync(DASHBOARD, 'utf8'), /"\$\{?DS_|__inputs/, 'not an export that asks for a datasource on import');
});

test('the dashboard shows what the issue asks for', (t) => {
  const used = new Set(dashboardExpressions().flatMap(({ expr }) => metricNames(expr)));
  const exprs = dashboardExpressions().map((e) => e.expr);
  for (const name of [
    'intake_http_requests_total',
    'intake_http_request_duration_seconds_bucket',
    'intake_queue_jobs',
    'intake_queue_oldest_event_age_seconds',
    'intake_worker_stored_lag_seconds_bucket',
    'intake_worker_batch_events_sum',
    'intake_worker_insert_batch_size_sum',
    'intake_journey_messages_total',
    'process_resident_memory_bytes',
    'intake_redis_memory_used_bytes',
    'intake_redis_memory_max_bytes',
    'intake_redis_oom',
    'intake_events_partitions_ahead_days',
    'intake_storage_bytes',
    'intake_events_oldest_age_seconds',
  ]) {
    t.true(used.has(name), name);
  }
  // A panel per API: its answers by status and its latency by status.
  for (const route of ['track', 'identify', 'profiles']) {
    t.true(
      exprs.some((e) => e.includes(`intake_http_requests_total{route="${route}"}`) && e.includes('by (status)')),
      `${route} rate by status`,
    );
    t.true(
      exprs.some((e) => e.includes(`intake_http_request_duration_seconds_bucket{route="${route}"}`) && e.includes('status')),
      `${route} latency by status`,
    );
  }
  t.true(
    exprs.some((e) => e.includes('status=~"503|429"')),
    '503 and 429 rates',
  );
  t.true(
    exprs.some((e) => e.includes('queue="events-dead-letter"')),
    'dead letters',
  );
  t.true(
    exprs.some((e) => e.includes('route=~"track|identify|profiles",status=~"500|503"') && e.includes('by (route, status)')),
    'server errors of every API by route: 500 (PostgreSQL) and 503 (Redis)',
  );
});

test('compose wires the observability profile: files where the configurations expect them, service discovery on the replicas', (t) => {
  const { prometheus, grafana } = services;
  // Only with --profile observability; a plain `docker compose up` runs what it did (the queue
  // dashboard and the Redis Cluster setup have profiles of their own: compose.test.ts).
  t.deepEqual(prometheus.profiles, ['observability']);
  t.deepEqual(grafana.profiles, ['observability']);
  for (const [name, service] of Object.entries(services)) {
    if (['prometheus', 'grafana'].includes(name)) continue;
    t.true(service.profiles === undefined || ['dashboard', 'cluster'].includes(String(service.profiles)), `${name}: ${service.profiles}`);
  }
  // Every config file exists; each target is where its reader looks.
  const target = (service: any, file: string) => {
    const mount = (service.configs as { source: string; target: string }[]).find((c) => path.resolve(root, compose.configs[c.source].file) === file);
    t.truthy(mount, `${path.relative(root, file)} is mounted`);
    return mount?.target ?? '';
  };
  for (const config of Object.values<{ file?: string }>(compose.configs)) if (config.file) t.true(existsSync(path.resolve(root, config.file)), config.file);

  const configTarget = target(prometheus, PROMETHEUS_CONFIG);
  t.true(prometheus.command.includes(`--config.file=${configTarget}`));
  const shipped = readYaml(PROMETHEUS_CONFIG);
  t.deepEqual(
    shipped.rule_files.map((f: string) => path.posix.resolve(path.posix.dirname(configTarget), f)),
    [target(prometheus, ALERT_RULES)],
    'the rule file is mounted where prometheus.yml loads it',
  );
  // One job per scaled service, found through Docker's DNS on the port the service serves /metrics on.
  const defaults = loadConfig({});
  const ports: Record<string, number> = { gateway: defaults.port, worker: defaults.workerMetricsPort };
  t.deepEqual(
    shipped.scrape_configs.map((job: any) => [job.job_name, job.dns_sd_configs[0].names, job.dns_sd_configs[0].type, job.dns_sd_configs[0].port]),
    [
      ['gateway', ['gateway'], 'A', ports.gateway],
      ['worker', ['worker'], 'A', ports.worker],
    ],
  );
  for (const name of ['gateway', 'worker']) {
    t.is(services[name].environment.PORT, undefined, `${name} keeps the default port`);
    t.is(services[name].environment.WORKER_METRICS_PORT, undefined, `${name} keeps the default metrics port`);
  }

  // Grafana: the datasource is the prometheus service; the provider reads the folder the dashboard is mounted in.
  const [datasource] = readYaml(DATASOURCES).datasources;
  const container = /^127\.0\.0\.1:\$\{PROMETHEUS_PORT:-9090\}:(\d+)$/.exec(prometheus.ports[0])?.[1];
  t.is(datasource.url, `http://prometheus:${container}`);
  t.is(datasource.jsonData.timeInterval, shipped.global.scrape_interval, "$__rate_interval follows Prometheus's scrape interval");
  t.is(target(grafana, DATASOURCES), '/etc/grafana/provisioning/datasources/prometheus.yml');
  t.is(target(grafana, DASHBOARD_PROVIDERS), '/etc/grafana/provisioning/dashboards/intake.yml');
  const [provider] = readYaml(DASHBOARD_PROVIDERS).providers;
  t.is(path.posix.dirname(target(grafana, DASHBOARD)), provider.options.path);
  t.is(grafana.environment.GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH, target(grafana, DASHBOARD));
  // Both reachable from the Docker host only.
  t.regex(prometheus.ports[0], /^127\.0\.0\.1:/);
  t.regex(grafana.ports[0], /^127\.0\.0\.1:/);
  t.is(grafana.environment.GF_AUTH_ANONYMOUS_ORG_ROLE, 'Viewer');
  // Every expression of the pack is somewhere the live test runs it.
  t.true(alertExpressions().length === alertRules().length && dashboardExpressions().length >= 20);
  t.true(
    alertExpressions().every(({ expr }) => asVerdicts(expr) !== expr),
    'every alert compares',
  );
});
