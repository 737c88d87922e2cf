// docker-compose.yml cannot run here (no Docker engine), so it is kept honest statically: valid
// against the compose schema (dclint), running the same commands as the npm scripts and the
// tests, durable Redis settings, scalable services; and its health checks are executed for real
// against a gateway, a worker and a dashboard on this machine.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { DCLinter } from 'dclint';
import { parse } from 'yaml';
import { loadConfig } from '../../common/config.ts';
import { createLogger } from '../../common/logger.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
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
    t.is(service.build, '.', name);
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
  t.is(services.dashboard.depends_on.migrate, undefined, 'the dashboard needs only Redis');
});

test('health checks and the proxy config contain no `$` that compose would interpolate', (t) => {
  for (const [name, service] of Object.entries(services)) {
    for (const part of service.healthcheck?.test ?? []) t.notRegex(part, /\$/, name);
  }
  for (const config of Object.values(compose.configs as Record<string, { content: string }>)) t.notRegex(config.content, /\$/);
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
