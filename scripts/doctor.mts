// npm run doctor: what this checkout needs, checked, each problem with the setting (or the
// package) to change. Node.js against package.json's engines; the configuration (environment,
// then .env, as `intake` reads it); PostgreSQL at DATABASE_URL (reachable, database there,
// migrations applied); Redis at REDIS_URL (reachable, version, eviction policy); the gateway's and
// the dashboard's ports; and the tools of the tests and the benchmark (promtool and prometheus,
// chromium, wrk). `npm test` runs the test-side checks (scripts/test.mts) before anything else.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { Redis } from 'ioredis';
import { ConfigError, loadConfig, type Config } from '../platform/config.ts';
import { loadEnvFile } from '../platform/env-file.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export type Status = 'ok' | 'warn' | 'fail';
export interface Finding {
  status: Status;
  /** What was checked, with what was found. */
  what: string;
  /** For a problem: what to change (the setting, the package). */
  fix?: string;
}

const ok = (what: string): Finding => ({ status: 'ok', what });
const warn = (what: string, fix: string): Finding => ({ status: 'warn', what, fix });
const fail = (what: string, fix: string): Finding => ({ status: 'fail', what, fix });

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
    return fail(`${where}: ${e.message || e.code}`, `start PostgreSQL, or set ${setting} (in .env or the environment) to where it runs`);
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
  redis.on('error', () => {});
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
    return fail(`${where}: ${message}`, `start Redis, or set ${setting} (in .env or the environment) to where it runs`);
  } finally {
    redis.disconnect();
  }
}

/** A port that `npm start` would take: free, or a warning naming its setting. */
export function checkPort(port: number, host: string, setting: string): Promise<Finding> {
  if (port === 0) return Promise.resolve(ok(`${setting}=0: any free port`));
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (err: NodeJS.ErrnoException) =>
      resolve(warn(`${setting} ${port} on ${host} is taken (${err.code})`, `stop what listens there (another intake?), or set ${setting} in .env`)),
    );
    server.listen(port, host, () => server.close(() => resolve(ok(`${setting} ${port} on ${host} is free`))));
  });
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
  return required ? fail(what, install) : warn(what, install);
}

const PROMETHEUS = "apt-get install prometheus (Debian's package: promtool and the server); `bash .ci/run` installs it";
const CHROMIUM = "apt-get install chromium (Debian's package); `bash .ci/run` installs it";

/** What `npm test` cannot run without: checked before it runs anything. */
export async function testPrerequisites(env: NodeJS.ProcessEnv = process.env): Promise<Finding[]> {
  const database = env.TEST_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_test';
  const redis = env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
  return [
    checkNode(),
    await checkPostgres(database, 'TEST_DATABASE_URL', { migrations: false }),
    await checkRedis(redis, 'TEST_REDIS_URL'),
    checkTool('promtool', 'the alert rules and their unit tests, test/ops/observability-files.test.ts', PROMETHEUS, { required: true }),
    checkTool('prometheus', 'the live Prometheus of test/ops/prometheus.test.ts', PROMETHEUS, { required: true }),
    checkTool('chromium', "the dashboard's browser test, test/ops/live-view.test.ts", CHROMIUM, { required: true, paths: ['/usr/bin/chromium'] }),
  ];
}

/** Everything `npm run doctor` checks. */
export async function doctor(): Promise<Finding[]> {
  const findings: Finding[] = [checkNode()];
  let config: Config;
  try {
    const { file } = loadEnvFile();
    findings.push(
      ok(
        file
          ? `settings: the environment, then ${path.relative(process.cwd(), file) || file}`
          : 'settings: the environment (no .env here; .env.example lists them)',
      ),
    );
    config = loadConfig();
    findings.push(ok('settings are valid'));
  } catch (err) {
    const message = err instanceof ConfigError ? err.message.replace(/:\n\s+/, ': ').replace(/\s*\n\s*/g, '; ') : (err as Error).message;
    findings.push(fail(message, 'change them in .env or the environment (docs/configuration.md)'));
    return findings;
  }
  findings.push(await checkPostgres(config.databaseUrl, 'DATABASE_URL'), await checkRedis(config.redisUrl, 'REDIS_URL'));
  findings.push(await checkPort(config.port, config.host, 'PORT'), await checkPort(config.dashboardPort, config.host, 'DASHBOARD_PORT'));
  findings.push(...(await testPrerequisites()).slice(1));
  findings.push(checkTool('wrk', 'npm run bench, the load runs', 'apt-get install wrk'));
  return findings;
}

export function printFindings(findings: Finding[], out: NodeJS.WritableStream = process.stdout): void {
  for (const f of findings) out.write(`${f.status.padEnd(4)}  ${f.what}${f.fix ? `\n      → ${f.fix}` : ''}\n`);
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const findings = await doctor();
  printFindings(findings);
  const failed = findings.filter((f) => f.status === 'fail').length;
  const warned = findings.filter((f) => f.status === 'warn').length;
  console.log(`doctor: ${failed} problem${failed === 1 ? '' : 's'}, ${warned} warning${warned === 1 ? '' : 's'}`);
  process.exitCode = failed ? 1 : 0;
}
