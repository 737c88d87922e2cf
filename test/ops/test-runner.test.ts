// `npm test` (scripts/test.mts) and `npm run doctor` (scripts/doctor.mts) as a newcomer meets
// them: without promtool and without the right to install it, npm test says so (and why, and how
// to install it) before running anything; ava's closing lines become one total; the doctor answers whether the service can
// run (the test tools only with --tests), checks each port on the address its process binds, and
// names the setting to change.
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { satisfiesEngines, servicePorts } from '../../scripts/doctor.mts';
import { avaCounts, failureLines } from '../../scripts/test.mts';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/services.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

function node(
  script: string,
  env: NodeJS.ProcessEnv,
  args: string[] = [],
  user: { uid?: number; gid?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, ['--import', 'tsx', path.join(ROOT, script), ...args], { cwd: ROOT, env, timeout: 120_000, ...user }, (err, stdout, stderr) =>
      resolve({ code: err ? Number((err as { code?: unknown }).code ?? 1) : 0, stdout, stderr }),
    ),
  );
}

/**
 * A user who may not install: npm test installs packages as root or with passwordless sudo, so
 * under root the script runs as `nobody`; any other user, with no sudo on the PATH below, may not either.
 */
const WITHOUT_PRIVILEGE = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};

/** A doctor's line: its status, then `text` as written. */
const line = (status: string, text: string) => new RegExp(`^${status}\\s+${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`, 'm');

/** A PATH that holds node alone (and `also`): no promtool, no prometheus, no sudo (chromium is found at /usr/bin/chromium if installed). */
function nodeOnlyPath(t: { teardown(fn: () => void): void }, also: string[] = []): string {
  const bin = mkdtempSync(path.join(tmpdir(), 'intake-path-'));
  t.teardown(() => rmSync(bin, { recursive: true, force: true }));
  chmodSync(bin, 0o755); // readable by the unprivileged user too
  symlinkSync(process.execPath, path.join(bin, 'node'));
  for (const program of also) if (existsSync(program)) symlinkSync(program, path.join(bin, path.basename(program)));
  return bin;
}

/** A setup that runs the service: the test PostgreSQL and Redis, no .env, any free ports unless set. */
function serviceEnv(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    ...process.env,
    INTAKE_ENV_FILE: '',
    DATABASE_URL: TEST_DATABASE_URL,
    REDIS_URL: TEST_REDIS_URL,
    PORT: '0',
    WORKER_METRICS_PORT: '0',
    DASHBOARD_PORT: '0',
    ...overrides,
  };
}

test('without promtool and prometheus on PATH, and no right to install them, npm test says what is missing, why and how to get it, and runs nothing', async (t) => {
  // apt-get is there (on Debian): what stops the install is the permission.
  const run = await node('scripts/test.mts', { ...process.env, PATH: nodeOnlyPath(t, ['/usr/bin/apt-get']) }, [], WITHOUT_PRIVILEGE);
  t.is(run.code, 1, run.stdout + run.stderr);
  t.regex(run.stderr, /npm test needs what is missing below; nothing was run/);
  t.regex(
    run.stderr,
    /fail\s+promtool not found \(the alert rules and their unit tests[^\n]*\n\s+→ apt-get install --no-install-recommends prometheus \(Debian's package[^\n]*npm test installs it itself when run as root or with passwordless sudo/,
  );
  t.regex(run.stderr, /fail\s+prometheus not found/);
  t.regex(run.stderr, /promtool, prometheus[^\n]*: (npm test installs packages and starts servers only as root or with passwordless sudo|no apt-get on PATH)/);
  t.notRegex(run.stdout, /^installing /m, 'nothing installed');
  t.notRegex(run.stdout + run.stderr, /── typecheck/, 'no group ran');
  t.regex(run.stdout, /^total: 0 passed, \d+ failed \(prerequisites\)$/m);
});

test("ava's closing lines add up to one total", (t) => {
  t.deepEqual(avaCounts('  ✔ a\n  ─\n\n  12 tests passed\n'), { passed: 12, failed: 0, skipped: 0 });
  t.deepEqual(avaCounts('  1 known failure\n  3 tests failed\n  2 tests skipped\n  1 test todo\n  40 tests passed\n  1 uncaught exception\n'), {
    passed: 40,
    failed: 4,
    skipped: 4,
  });
  t.deepEqual(avaCounts('  1 test passed\n  1 test failed\n'), { passed: 1, failed: 1, skipped: 0 });
  // With failures ava prints no passed count: the ✔ lines are counted.
  t.deepEqual(avaCounts('  ✔ a › one (2s)\n  ✘ [fail]: a › two\n  ✔ b › three\n    ℹ a log line ✔ \n  ─\n\n  1 test failed\n'), {
    passed: 2,
    failed: 1,
    skipped: 0,
  });
});

test('what failed is repeated at the end: ✘ lines, timeouts and uncaught exceptions, once each', (t) => {
  const output = [
    '  ✔ a › one',
    '  ✘ [fail]: a › two Expected 202',
    '  ✘ Timed out while running tests',
    '  Uncaught exception in test/b.test.ts',
    '  ✘ [fail]: a › two Expected 202',
    '    ℹ a log line',
  ].join('\n');
  t.deepEqual(failureLines(output), ['  ✘ [fail]: a › two Expected 202', '  ✘ Timed out while running tests', '  Uncaught exception in test/b.test.ts']);
  t.deepEqual(failureLines('  ✔ a › one\n  12 tests passed\n'), []);
});

test('the doctor names the setting to change: an unreachable DATABASE_URL, a Redis database out of range', async (t) => {
  const env = {
    ...process.env,
    INTAKE_ENV_FILE: '',
    DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/x',
    REDIS_URL: 'redis://127.0.0.1:6379/999',
    PORT: '0',
    WORKER_METRICS_PORT: '0',
    DASHBOARD_PORT: '0',
  };
  const run = await node('scripts/doctor.mts', env);
  t.is(run.code, 1);
  t.regex(run.stdout, /fail\s+PostgreSQL at 127\.0\.0\.1:1 \(DATABASE_URL\): [^\n]+\n\s+→ start PostgreSQL, or set DATABASE_URL/);
  t.regex(run.stdout, /fail\s+Redis at 127\.0\.0\.1:6379 \(REDIS_URL\): ERR DB index is out of range\n\s+→ use a database number the server has in REDIS_URL/);
  t.regex(run.stdout, /^ok\s+Node\.js v/m);
  t.regex(run.stdout, /^doctor: \d+ problems?, \d+ warnings?$/m);
});

test('without the test tools on PATH the doctor exits 0, the service can run; --tests reports them', async (t) => {
  const env = serviceEnv({ PATH: nodeOnlyPath(t) });
  const run = await node('scripts/doctor.mts', env);
  t.is(run.code, 0, run.stdout + run.stderr);
  t.notRegex(run.stdout, /promtool|prometheus|chromium|wrk/);
  t.regex(run.stdout, /^(ok|warn)\s+PostgreSQL at [^\n]+ \(DATABASE_URL\)/m);
  t.regex(run.stdout, /npm run doctor -- --tests adds what npm test needs/);
  t.regex(run.stdout, /^doctor: 0 problems, \d+ warnings?$/m);

  const tests = await node('scripts/doctor.mts', env, ['--tests']);
  t.is(tests.code, 1);
  t.regex(tests.stdout, /^fail\s+promtool not found \(the alert rules[^\n]*\n\s+→ apt-get install --no-install-recommends prometheus/m);
  t.regex(tests.stdout, /^fail\s+prometheus not found/m);
  t.regex(tests.stdout, /^(ok|fail)\s+chromium/m);
  t.regex(tests.stdout, /^(ok|fail)\s+PostgreSQL at [^\n]+ \(TEST_DATABASE_URL\)/m);
  t.regex(tests.stdout, /^doctor: [1-9]\d* problems?, \d+ warnings?$/m);
});

test('the doctor says what npm test gets itself here, from the same plan', async (t) => {
  // Only where that is this machine's case: root (or passwordless sudo) and apt-get. The doctor installs nothing.
  const env = serviceEnv({ PATH: nodeOnlyPath(t, ['/usr/bin/apt-get']) });
  t.timeout(60_000);
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) return t.pass('not root on Debian: npm test would install nothing here');
  const run = await node('scripts/doctor.mts', env, ['--tests']);
  t.regex(run.stdout, /^warn\s+promtool not found[^\n]*\n\s+→ npm test does it itself here: installing Debian's prometheus package \(promtool and/m);
  t.regex(run.stdout, /^warn\s+prometheus not found[^\n]*\n\s+→ npm test does it itself here: installing Debian's prometheus package/m);
  t.is(run.code, 0, run.stdout);
});

test('nothing at the default addresses, DATABASE_URL and REDIS_URL unset: the doctor says npm start runs its own servers, exit 0', async (t) => {
  // The tests cannot stop the machine's servers: the defaults move to unused ports, as in test/ops/local-services.test.ts.
  const env = serviceEnv({ INTAKE_DEFAULT_DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/intake', INTAKE_DEFAULT_REDIS_URL: 'redis://127.0.0.1:1' });
  delete env.DATABASE_URL;
  delete env.REDIS_URL;
  const run = await node('scripts/doctor.mts', env);
  t.regex(run.stdout, line('ok', 'no PostgreSQL answers at 127.0.0.1:1 and DATABASE_URL is unset: npm start runs the embedded PostgreSQL of this folder'));
  t.regex(run.stdout, line('ok', "no Redis answers at 127.0.0.1:1 and REDIS_URL is unset: npm start starts this machine's redis-server"));
  t.is(run.code, 0, run.stdout);

  const embedded = await node('scripts/doctor.mts', serviceEnv({ DATABASE_URL: 'embedded' }));
  t.regex(embedded.stdout, line('ok', 'DATABASE_URL=embedded: npm start runs the embedded PostgreSQL of this folder'));
  t.is(embedded.code, 0, embedded.stdout);
});

test("each port is checked on the address its process binds: a port taken on 127.0.0.1 is the dashboard's problem, not the gateway's on another HOST", async (t) => {
  // HOST=127.0.0.2, another loopback address (Linux answers on all of 127.0.0.0/8): the gateway
  // and the worker's metrics bind there, the dashboard binds 127.0.0.1 (DASHBOARD_HOST's default).
  const listen = (host: string) =>
    new Promise<number>((resolve, reject) => {
      const server = net.createServer().once('error', reject);
      server.listen(0, host, () => resolve((server.address() as net.AddressInfo).port));
      t.teardown(() => server.close());
    });
  const [dashboard, gateway, metrics] = [await listen('127.0.0.1'), await listen('127.0.0.2'), await listen('127.0.0.2')];
  const run = await node(
    'scripts/doctor.mts',
    serviceEnv({ HOST: '127.0.0.2', PORT: `${gateway}`, WORKER_METRICS_PORT: `${metrics}`, DASHBOARD_PORT: `${dashboard}` }),
  );
  t.regex(run.stdout, line('warn', `DASHBOARD_PORT ${dashboard} on 127.0.0.1 (the dashboard) is taken: npm start runs without the dashboard`));
  t.regex(
    run.stdout,
    line('fail', `PORT ${gateway} on 127.0.0.2 (the gateway) is taken\n      → stop what listens there (another intake?), or set PORT in .env`),
  );
  t.regex(run.stdout, line('warn', `WORKER_METRICS_PORT ${metrics} on 127.0.0.2 (the worker's /metrics) is taken: npm start runs without`));
  t.is(run.code, 1, 'npm start cannot run without its gateway');

  // The same ports, the gateway's on 127.0.0.2 where it is free: only the dashboard's is taken, and npm start runs.
  const free = await node('scripts/doctor.mts', serviceEnv({ HOST: '127.0.0.2', PORT: `${dashboard}`, DASHBOARD_PORT: `${dashboard}` }));
  t.regex(free.stdout, line('ok', `PORT ${dashboard} on 127.0.0.2 (the gateway) is free`));
  t.regex(free.stdout, line('warn', `DASHBOARD_PORT ${dashboard} on 127.0.0.1 (the dashboard) is taken`));
  t.is(free.code, 0, free.stdout);
});

test("the dashboard's port is checked on DASHBOARD_HOST, the others on HOST", (t) => {
  const ports = servicePorts({ port: 3000, host: '0.0.0.0', workerMetricsPort: 9100, dashboardPort: 3001, dashboardHost: '127.0.0.1' });
  t.deepEqual(
    ports.map(({ setting, port, host }) => `${setting} ${host}:${port}`),
    ['PORT 0.0.0.0:3000', 'WORKER_METRICS_PORT 0.0.0.0:9100', 'DASHBOARD_PORT 127.0.0.1:3001'],
  );
});

test('engines ranges: the tested lines only', (t) => {
  const range = '^20.19.0 || ^24.0.0';
  t.true(satisfiesEngines('v20.19.0', range));
  t.true(satisfiesEngines('v24.11.1', range));
  t.false(satisfiesEngines('v20.18.3', range));
  t.false(satisfiesEngines('v22.12.0', range));
  t.false(satisfiesEngines('v18.20.0', range));
});
