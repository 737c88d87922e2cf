// docker-compose.yml cannot run here (no Docker engine), so it is kept honest statically: valid
// against the compose schema (dclint), running the same commands as the npm scripts and the
// tests, durable Redis settings, scalable services; and its health checks are executed for real
// against a gateway, a worker and a dashboard on this machine. The minimum Compose version the
// file states is the one its newest key needs, and `npm run compose:check` enforces it.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { DCLinter } from 'dclint';
import { parse } from 'yaml';
import { atLeast, formatVersion, parseComposeVersion, statedMinimum, type Version } from '../../scripts/compose-check.mts';
import { loadConfig } from '../../platform/config.ts';
import { createLogger } from '../../platform/logger.ts';
import { exposureProblem, startDashboard } from '../../gateway/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { openHarness } from '../helpers/services.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const composeFile = path.join(root, 'docker-compose.yml');
const compose = parse(readFileSync(composeFile, 'utf8'), { merge: true });
const scripts: Record<string, string> = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).scripts;
const services: Record<string, any> = compose.services;
const INTAKE_SERVICES = ['gateway', 'worker', 'migrate', 'dashboard'];

/** Compose's `${VAR:-default}` with nothing set: what a plain `docker compose up` runs. */
const withDefaults = (value: string) => value.replace(/\$\{\w+:-([^}]*)\}/g, '$1');

// dclint's bundled declarations use extensionless relative imports, which NodeNext cannot follow.
interface LintResult {
  errorCount: number;
  messages: { line: number; rule: string; message: string }[];
}

function lint(file: string): LintResult {
  // dclint's defaults, as `npm run lint:compose` uses them (no config file in the repository).
  const linter = new DCLinter({ rules: {}, quiet: false, debug: false, exclude: [] });
  const [result] = linter.lintFiles([file], false) as LintResult[];
  return result;
}

test('docker-compose.yml passes `npm run lint:compose`: valid against the compose schema, no warnings', (t) => {
  t.regex(scripts['lint:compose'], /^dclint --max-warnings 0 docker-compose\.yml$/);
  const result = lint(composeFile);
  t.deepEqual(
    result.messages.map((m) => `${m.line}: ${m.rule}: ${m.message}`),
    [],
  );
});

test('dclint rejects a compose file the schema does not allow (the check above can fail)', (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'compose-'));
  const file = path.join(dir, 'docker-compose.yml');
  writeFileSync(file, 'name: x\nservices:\n  gateway:\n    image: intake:local\n    comand: ["node", "bin/intake.js", "gateway"]\n');
  const result = lint(file);
  t.true(result.errorCount > 0);
  t.true(result.messages.some((m) => m.rule === 'invalid-schema'));
});

test('each intake service runs its npm script, which is the `bin/intake.js <command>` the tests start', (t) => {
  for (const name of INTAKE_SERVICES) {
    const service = services[name];
    t.truthy(service, name);
    // Exec form with node itself: no npm or shell between the init process and node, so SIGTERM reaches it.
    t.deepEqual(service.command, ['node', 'bin/intake.js', name], name);
    // The script execs node (so SIGTERM reaches it); the service runs the same command directly.
    t.is(scripts[name], `exec ${service.command.join(' ')}`, `npm run ${name}`);
    t.is(service.image, services.gateway.image, `${name} uses the one intake image`);
  }
  // The image is built once: by migrate, which every other intake service waits for; they never pull it.
  t.deepEqual(
    INTAKE_SERVICES.filter((name) => services[name].build !== undefined),
    ['migrate'],
    'one service builds the image',
  );
  t.is(services.migrate.build, '.');
  for (const name of INTAKE_SERVICES.filter((n) => n !== 'migrate')) {
    t.is(services[name].pull_policy, 'never', `${name} runs the image migrate built`);
    t.is(services[name].depends_on.migrate.condition, 'service_completed_successfully', `${name} starts after migrate`);
  }
  // The long-running ones are restarted; the one-shot migrate is not, and the rest wait for it.
  for (const name of ['gateway', 'worker', 'dashboard']) t.is(services[name].restart, 'unless-stopped', name);
  t.is(services.migrate.restart, 'no');
  // Docker's SIGKILL must not cut the graceful drain short.
  for (const name of ['gateway', 'worker', 'dashboard']) {
    const grace = /^(\d+)s$/.exec(services[name].stop_grace_period)?.[1];
    t.true(Number(grace) * 1000 > loadConfig({}).shutdownTimeoutMs, `${name} stop_grace_period`);
  }
  for (const name of ['gateway', 'worker']) t.is(services[name].depends_on.migrate.condition, 'service_completed_successfully', name);
  t.is(scripts.start, 'exec node bin/intake.js dev');
});

test('redis keeps an append-only file on a volume and never evicts', (t) => {
  const args: string[] = services.redis.command.map(withDefaults);
  t.is(args[0], 'redis-server');
  const option = (name: string) => args[args.indexOf(`--${name}`) + 1];
  t.is(option('appendonly'), 'yes');
  t.true(['always', 'everysec'].includes(option('appendfsync')), option('appendfsync'));
  t.is(option('maxmemory-policy'), 'noeviction');
  // An append-only file inside the container's own layer would not outlive `docker compose down`/up.
  t.true(
    (services.redis.volumes as string[]).some((v) => v.endsWith(':/data') && compose.volumes[v.split(':')[0]] !== undefined),
    'named volume at /data',
  );
  t.true((services.postgres.volumes as string[]).some((v) => v.endsWith(':/var/lib/postgresql/data')));
});

test('gateway and worker scale: health checks, no container_name, no host port on scaled services', (t) => {
  for (const [name, service] of Object.entries(services)) t.is(service.container_name, undefined, name);
  for (const name of ['gateway', 'worker']) {
    const check = services[name].healthcheck;
    t.truthy(check?.test, name);
    t.not(check.disable, true, name);
    t.is(check.test[0], 'CMD', name);
    t.is(services[name].deploy?.replicas, undefined, `${name}: --scale decides`);
  }
  // Replicas of a service cannot share a fixed host port: gateways publish none, the proxy is the entry point.
  t.is(services.gateway.ports, undefined);
  t.is(services.worker.ports, undefined);
  t.deepEqual(services.proxy.ports.map(withDefaults), ['0.0.0.0:3000:3000']);
  const proxyConfig: string = compose.configs[services.proxy.configs[0].source].content;
  t.regex(proxyConfig, /server gateway:3000 resolve;/);
  t.regex(proxyConfig, /resolver 127\.0\.0\.11 /);
  // The dashboard is one instance, reachable from the Docker host only unless the user changes that.
  t.deepEqual(services.dashboard.ports.map(withDefaults), ['127.0.0.1:3001:3001']);
  t.deepEqual(Object.keys(services.dashboard.depends_on).sort(), ['migrate', 'redis'], 'the dashboard needs Redis and the migrated tables of its live pages');
});

test('the dashboard runs on request only (its profile), and only with DASHBOARD_PASSWORD', (t) => {
  const dashboard = services.dashboard;
  t.deepEqual(dashboard.profiles, ['dashboard']);
  // Inside the container it must listen where the published port arrives (not its loopback),
  // which intake allows only with a password: a plain `--profile dashboard up` refuses to start.
  const env = Object.fromEntries(Object.entries<string>(dashboard.environment).map(([k, v]) => [k, withDefaults(String(v))]));
  const config = loadConfig(env);
  t.is(config.dashboardHost, '0.0.0.0');
  t.is(config.dashboardPassword, '');
  t.regex(exposureProblem(config) ?? '', /^DASHBOARD_HOST=0\.0\.0\.0 is not a loopback address: set DASHBOARD_PASSWORD/);
  t.is(dashboard.environment.DASHBOARD_PASSWORD, '${DASHBOARD_PASSWORD:-}', 'the password comes from the user');
  t.is(exposureProblem(loadConfig({ ...env, DASHBOARD_PASSWORD: 'set by the user' })), null);
});

test('health checks and the proxy config contain no `$` that compose would interpolate', (t) => {
  for (const [name, service] of Object.entries(services)) {
    for (const part of service.healthcheck?.test ?? []) t.notRegex(part, /\$/, name);
  }
  const inline = Object.values(compose.configs as Record<string, { content?: string }>).filter((config) => config.content !== undefined);
  t.true(inline.length > 0);
  for (const config of inline) t.notRegex(config.content!, /\$/);
});

// The first Compose release that accepts each key this file uses. The Compose Specification's
// keys date from Compose 1.27.0, the first to implement it; the newer ones are from Docker's
// Compose file reference and the Compose release notes.
const SPEC = '1.27.0';
const SINCE: Record<string, Record<string, string>> = {
  topLevel: { name: '2.3.0', services: SPEC, volumes: SPEC, configs: SPEC },
  service: {
    build: SPEC,
    command: SPEC,
    configs: SPEC,
    depends_on: SPEC,
    environment: SPEC,
    healthcheck: SPEC,
    image: SPEC,
    pull_policy: '2.0.0',
    init: SPEC,
    ports: SPEC,
    profiles: '1.28.0',
    restart: SPEC,
    stop_grace_period: SPEC,
    volumes: SPEC,
  },
  config: { file: SPEC, content: '2.23.1', environment: '2.23.1' },
  healthcheck: { test: SPEC, interval: SPEC, timeout: SPEC, retries: SPEC, start_period: SPEC },
  dependsOn: { condition: SPEC },
  condition: { service_started: SPEC, service_healthy: SPEC, service_completed_successfully: '1.29.0' },
};

const toVersion = (text: string) => text.split('.').map(Number) as Version;

/** The newest Compose release any key of a parsed compose file needs, and the keys this table does not know. */
function composeNeeds(file: Record<string, any>): { needs: Version; unknown: string[] } {
  let needs = toVersion(SPEC);
  const unknown: string[] = [];
  const use = (kind: string, key: string, where: string) => {
    const since = SINCE[kind][key];
    if (since === undefined) unknown.push(`${where}: ${key}`);
    else if (!atLeast(needs, toVersion(since))) needs = toVersion(since);
  };
  for (const key of Object.keys(file)) if (!key.startsWith('x-')) use('topLevel', key, 'top level');
  for (const [name, service] of Object.entries<Record<string, any>>(file.services ?? {})) {
    for (const key of Object.keys(service)) use('service', key, name);
    for (const key of Object.keys(service.healthcheck ?? {})) use('healthcheck', key, `${name}.healthcheck`);
    if (service.depends_on && !Array.isArray(service.depends_on)) {
      for (const dependency of Object.values<Record<string, string>>(service.depends_on)) {
        for (const key of Object.keys(dependency)) use('dependsOn', key, `${name}.depends_on`);
        if (dependency.condition) use('condition', dependency.condition, `${name}.depends_on.condition`);
      }
    }
  }
  for (const [name, config] of Object.entries<object>(file.configs ?? {})) for (const key of Object.keys(config)) use('config', key, `configs.${name}`);
  return { needs, unknown };
}

test('the minimum Compose version the file and README state is what the newest key of the file needs', (t) => {
  const { needs, unknown } = composeNeeds(compose);
  t.deepEqual(unknown, [], 'a key the table above does not know: add it with the Compose release that brought it');
  t.deepEqual(needs, [2, 23, 1], 'configs.content');
  const text = readFileSync(composeFile, 'utf8');
  t.deepEqual(statedMinimum(text), needs);
  t.true(readFileSync(path.join(root, 'README.md'), 'utf8').includes(`Docker Compose ${formatVersion(needs)} or later`), 'README states it');
  // The check can fail: without inline configs the file would need less; a key it does not know is reported.
  t.deepEqual(composeNeeds(parse('name: x\nservices:\n  a:\n    image: b\n')).needs, [2, 3, 0]);
  t.deepEqual(composeNeeds(parse('services:\n  a:\n    image: b\n    develop: {}\n')).unknown, ['a: develop']);
});

test('compose:check reads `docker compose version` outputs and compares versions', (t) => {
  t.deepEqual(parseComposeVersion('Docker Compose version v2.29.7-desktop.1'), [2, 29, 7]);
  t.deepEqual(parseComposeVersion('2.23.1\n'), [2, 23, 1]);
  t.deepEqual(parseComposeVersion('docker-compose version 1.29.2, build unknown'), [1, 29, 2]);
  t.is(parseComposeVersion('unknown'), null);
  t.true(atLeast([2, 23, 1], [2, 23, 1]));
  t.true(atLeast([2, 24, 0], [2, 23, 1]));
  t.true(atLeast([3, 0, 0], [2, 23, 1]));
  t.false(atLeast([2, 23, 0], [2, 23, 1]));
  t.false(atLeast([2, 3, 9], [2, 23, 1]));
  t.false(atLeast([1, 29, 2], [2, 23, 1]));
  t.throws(() => statedMinimum('services: {}\n'), { message: /does not state/ });
});

test('`npm run compose:check` on this machine: passes only with a Compose recent enough that accepts the file', async (t) => {
  const here = await new Promise<string | null>((resolve) =>
    execFile('docker', ['compose', 'version', '--short'], (err, stdout) => resolve(err ? null : stdout)),
  );
  const version = here === null ? null : parseComposeVersion(here);
  const { code, out } = await new Promise<{ code: number; out: string }>((resolve) =>
    execFile(process.execPath, ['--import', 'tsx', scripts['compose:check'].split(' ').at(-1)!], { cwd: root }, (err, stdout, stderr) =>
      resolve({ code: err ? Number(err.code) : 0, out: stdout + stderr }),
    ),
  );
  t.regex(scripts['compose:check'], /^node --import tsx scripts\/compose-check\.mts$/);
  t.is(out.trim().split('\n').length, 1, out);
  if (version === null) {
    // No Compose v2 here (this machine has none): the one line names the minimum.
    t.is(code, 1);
    t.regex(out, /needs Docker Compose v2\.23\.1 or later: `docker compose` is not available/);
  } else if (!atLeast(version, statedMinimum(readFileSync(composeFile, 'utf8')))) {
    t.is(code, 1);
    t.regex(out, /needs Docker Compose v2\.23\.1 or later; this one is v/);
  } else {
    // A recent Compose: `docker compose config` itself validates the file, observability profile included.
    t.is(code, 0, out);
    t.regex(out, /accepts docker-compose\.yml/);
  }
});

/** Run a service's healthcheck command as Docker would (exec form), with the container's environment. */
function runHealthcheck(service: string, env: Record<string, string>): Promise<number> {
  const [form, command, ...args] = services[service].healthcheck.test as string[];
  if (form !== 'CMD' || command !== 'node') throw new Error(`${service}: expected ["CMD", "node", ...]`);
  return new Promise((resolve) => {
    execFile(process.execPath, args, { cwd: root, env: { PATH: process.env.PATH, ...env }, timeout: 15_000 }, (err) =>
      resolve(err ? (typeof err.code === 'number' ? err.code : 1) : 0),
    );
  });
}

const healthy = (service: string, env: Record<string, string>) =>
  eventually(async () => (await runHealthcheck(service, env)) === 0, { timeoutMs: 10_000, intervalMs: 200 });

test.serial('the gateway health check passes against a ready gateway, fails when none answers', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const port = new URL(gateway.url).port;
  // Ready once its Redis connection is up: Docker's retries play the part of `eventually`.
  t.true(await healthy('gateway', { PORT: port }));
  await gateway.close();
  t.is(await runHealthcheck('gateway', { PORT: port }), 1);
});

test.serial('the worker health check passes only while this host holds a worker on the events queue', async (t) => {
  const h = await openHarness();
  t.teardown(() => h.close());
  const env = { REDIS_URL: h.config.redisUrl, QUEUE_PREFIX: h.config.queuePrefix };
  t.is(await runHealthcheck('worker', env), 1, 'no worker yet');
  const worker = await workerInProcess(h);
  let stopped = false;
  t.teardown(() => (stopped ? undefined : worker.close()));
  t.true(await healthy('worker', env), 'worker running');
  t.is(await runHealthcheck('worker', { ...env, QUEUE_PREFIX: `${h.config.queuePrefix}-other` }), 1, 'a worker of another prefix does not count');
  await worker.close();
  stopped = true;
  t.true(await eventually(async () => (await runHealthcheck('worker', env)) === 1, { timeoutMs: 10_000 }), 'worker stopped');
  t.is(await runHealthcheck('worker', { ...env, REDIS_URL: 'redis://127.0.0.1:1' }), 1, 'Redis unreachable');
});

test.serial('the dashboard health check passes against a running dashboard', async (t) => {
  const h = await openHarness({ DASHBOARD_PORT: '0', DASHBOARD_PASSWORD: 'x' });
  t.teardown(() => h.close());
  const config = h.config;
  const board = await startDashboard({ config, db: h.db, log: createLogger('silent', 'test-dashboard') });
  t.teardown(() => board.close());
  t.true(await healthy('dashboard', { DASHBOARD_PORT: String(board.port) }));
  await board.close();
  t.is(await runHealthcheck('dashboard', { DASHBOARD_PORT: String(board.port) }), 1);
});

test('the cluster profile: a three-master Redis Cluster with a replica each, a streaming PostgreSQL replica, and intake set to use them', (t) => {
  const inCluster = Object.entries(services).filter(([, service]) => service.profiles?.includes('cluster'));
  t.deepEqual(inCluster.map(([name]) => name).sort(), [
    'gateway-cluster',
    'postgres-replica',
    'redis-cluster-1',
    'redis-cluster-2',
    'redis-cluster-3',
    'redis-cluster-4',
    'redis-cluster-5',
    'redis-cluster-6',
    'redis-cluster-init',
    'worker-cluster',
  ]);
  for (let n = 1; n <= 6; n++) {
    const args: string[] = services[`redis-cluster-${n}`].command.map(withDefaults);
    const option = (name: string) => args[args.indexOf(`--${name}`) + 1];
    t.is(option('cluster-enabled'), 'yes');
    t.is(option('appendonly'), 'yes');
    t.is(option('maxmemory-policy'), 'noeviction');
    t.true((services[`redis-cluster-${n}`].volumes as string[]).some((v) => v.endsWith(':/data')));
  }
  t.regex(services['redis-cluster-init'].command.join(' '), /--cluster create .*--cluster-replicas 1 --cluster-yes/);
  t.regex(services['postgres-replica'].command.join(' '), /pg_basebackup -h postgres .* -R /);
  t.regex(compose.configs['postgres-hba'].content, /^host replication all all scram-sha-256$/m);
  t.true(services.postgres.command.includes('hba_file=/etc/postgresql/pg_hba.conf'));
  for (const name of ['gateway-cluster', 'worker-cluster']) {
    t.deepEqual(services[name].command, ['node', 'bin/intake.js', name.replace('-cluster', '')]);
    const env = Object.fromEntries(Object.entries<string>(services[name].environment).map(([k, v]) => [k, withDefaults(String(v))]));
    const config = loadConfig(env);
    t.deepEqual(config.redisClusterNodes, ['redis-cluster-1:6379', 'redis-cluster-2:6379', 'redis-cluster-3:6379']);
    t.is(config.queuePartitions, 3);
    t.is(config.redisMinReplicaAcks, 1);
    t.is(new URL(config.databaseReadUrl).hostname, 'postgres-replica');
  }
});
