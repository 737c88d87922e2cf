// A machine with Node.js and redis-server but no PostgreSQL or Redis running: with
// DATABASE_URL and REDIS_URL unset and nothing at their default addresses, `intake dev` runs
// the embedded PostgreSQL and starts redis-server on a private port with the append-only file
// on, both with their data in the folder it runs in (.intake/), says so in one line each, and
// serves; the operator commands of that folder reach the same servers; stopping it stops them and
// keeps their data for the next start. The machine's own servers cannot be taken away from the
// other tests, so the default addresses are moved to unused ports (INTAKE_DEFAULT_DATABASE_URL,
// INTAKE_DEFAULT_REDIS_URL). Without redis-server, `intake dev` names the command that installs
// it; the processes of a deployment start nothing.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Redis } from 'ioredis';
import { describeConfig } from '../../platform/config.ts';
import { installCommand } from '../../cli/local-services/redis.ts';
import { isAlive } from '../../cli/local-services/shared.ts';
import { eventually } from '../helpers/eventually.ts';
import { freePort } from '../helpers/free-port.ts';
import { TEST_DATABASE_URL, testEnv, uniqueSlug } from '../helpers/services.ts';

const run = promisify(execFile);
const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');

/** A folder to run intake in, which the user postgres can enter (the server runs as that user under root). */
function folder(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-local-'));
  chmodSync(dir, 0o755);
  return dir;
}

/** The environment of a shell with no intake setting, the default addresses moved to ports nothing listens on. */
async function machineWithoutServers(extra: Record<string, string> = {}): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const { env: name } of describeConfig()) delete env[name];
  return {
    ...env,
    INTAKE_DEFAULT_DATABASE_URL: `postgresql://postgres@127.0.0.1:${await freePort()}/intake`,
    INTAKE_DEFAULT_REDIS_URL: `redis://127.0.0.1:${await freePort()}`,
    INTAKE_ENV_FILE: '',
    QUEUE_PREFIX: testEnv().QUEUE_PREFIX,
    PORT: '0',
    DASHBOARD_PORT: '0',
    WORKER_METRICS_PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...extra,
  };
}

/** `intake dev` in `cwd`; `port` resolves once the gateway listens. */
function dev(cwd: string, env: NodeJS.ProcessEnv) {
  const child = spawn(process.execPath, [bin, 'dev'], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const port = eventually(async () => Number(/"port":(\d+)[^\n]*"msg":"gateway listening"/.exec(out)?.[1] ?? 0) || (child.exitCode !== null ? -1 : 0), {
    timeoutMs: 120_000,
  });
  return {
    port,
    exited,
    stderr: () => err,
    output: () => `${err}\n${out}`.slice(-3000),
    stop: () => (child.exitCode === null && child.signalCode === null && child.kill('SIGTERM'), exited),
  };
}

const intake = (cwd: string, env: NodeJS.ProcessEnv, ...args: string[]) =>
  run(process.execPath, [bin, ...args], { cwd, env }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );

const redisState = (dir: string) => JSON.parse(readFileSync(path.join(dir, '.intake/redis/server.json'), 'utf8')) as { pid: number; port: number };
const postmasterPid = (dir: string) => Number(readFileSync(path.join(dir, '.intake/postgres/data/postmaster.pid'), 'utf8').split('\n')[0]);

test('Node.js and redis-server alone: intake dev runs the embedded PostgreSQL and a redis-server of the folder, and the commands of the folder reach both', async (t) => {
  t.timeout(300_000);
  const dir = folder();
  const env = await machineWithoutServers();
  const slug = uniqueSlug('local');
  let service = dev(dir, env);
  try {
    const port = await service.port;
    t.true(port > 0, service.output());
    const redisAt = new URL(env.INTAKE_DEFAULT_REDIS_URL!).host;
    const pgAt = new URL(env.INTAKE_DEFAULT_DATABASE_URL!).host;
    const { pid: redisPid, port: redisPort } = redisState(dir);
    t.true(
      service
        .stderr()
        .includes(
          `intake: no Redis answers at ${redisAt} and REDIS_URL is unset: started this machine's redis-server on 127.0.0.1:${redisPort} (append-only file on, data in .intake/redis;`,
        ),
      service.stderr(),
    );
    t.regex(
      service.stderr(),
      new RegExp(
        `^intake: no PostgreSQL answers at ${pgAt} and DATABASE_URL is unset: started the embedded PostgreSQL \\d+\\.\\d+ on 127\\.0\\.0\\.1:\\d+ \\(data in \\.intake/postgres;`,
        'm',
      ),
    );
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    t.is(ready.status, 200, await ready.text());

    // The Redis is a private one with the append-only file on, its data in the folder.
    const redis = new Redis(redisPort, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      t.deepEqual(await redis.config('GET', 'appendonly'), ['appendonly', 'yes']);
      t.deepEqual(await redis.config('GET', 'dir'), ['dir', path.join(dir, '.intake/redis')]);
      t.deepEqual(await redis.config('GET', 'bind'), ['bind', '127.0.0.1']);
    } finally {
      redis.disconnect();
    }

    // The folder's commands, with the same (unset) settings: the same PostgreSQL and Redis.
    t.is((await intake(dir, env, 'org', 'create', slug)).stdout, `{"slug":"${slug}","features":[]}\n`);
    const created = await intake(dir, env, 'key', 'create', slug);
    t.is(created.code, 0, created.stderr);
    t.is(created.stderr, '', 'joining the running servers says nothing');
    const key = JSON.parse(created.stdout).key as string;
    const track = await fetch(`http://127.0.0.1:${port}/api/track/${slug}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify({ type: 'track', messageId: 'm-1', event: 'Signed Up', userId: 'u-1', timestamp: new Date().toISOString() }),
    });
    t.is(track.status, 202, await track.text());
    // events get reads the queue in Redis too.
    const stored = await eventually(async () => (await intake(dir, env, 'events', 'get', slug, 'm-1')).stdout.includes('"status":"processed"'), {
      timeoutMs: 60_000,
    });
    t.true(stored, 'the worker stored the event; events get found it');

    t.is(await service.stop(), 0, service.output());
    t.false(isAlive(redisPid), 'redis-server stopped with intake dev');
    t.false(existsSync(path.join(dir, '.intake/postgres/data/postmaster.pid')), 'so did the embedded PostgreSQL');
    t.true(existsSync(path.join(dir, '.intake/redis/appendonlydir')), "Redis's append-only file is kept");

    // The next start finds the data of the last.
    service = dev(dir, env);
    t.true((await service.port) > 0, service.output());
    const again = await intake(dir, env, 'events', 'get', slug, 'm-1');
    t.true(again.stdout.includes('"status":"processed"'), again.stdout + again.stderr);
    const pgPid = postmasterPid(dir);
    t.is(await service.stop(), 0, service.output());
    t.false(isAlive(pgPid), 'the embedded PostgreSQL stopped again');
  } finally {
    await service.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a command run while no server of the folder runs starts them for itself and stops them when it ends', async (t) => {
  t.timeout(180_000);
  const dir = folder();
  const env = await machineWithoutServers();
  try {
    const migrated = await intake(dir, env, 'migrate');
    t.is(migrated.code, 0, migrated.stderr);
    t.regex(migrated.stderr, /^intake: no PostgreSQL answers at .* started the embedded PostgreSQL/m);
    t.notRegex(migrated.stderr, /Redis/, 'migrate needs no Redis');
    const slug = uniqueSlug('local');
    const created = await intake(dir, env, 'org', 'create', slug);
    t.is(created.stdout, `{"slug":"${slug}","features":[]}\n`, created.stderr);
    // The same lines as intake dev's: a command that starts a server says so.
    t.regex(created.stderr, /^intake: no PostgreSQL answers at .* started the embedded PostgreSQL/m);
    t.regex(created.stderr, /^intake: no Redis answers at .* started this machine's redis-server/m);
    t.false(existsSync(path.join(dir, '.intake/postgres/data/postmaster.pid')), 'the embedded PostgreSQL is stopped');
    t.false(existsSync(path.join(dir, '.intake/redis/server.json')), 'so is redis-server');
    // DATABASE_URL=embedded names the same server.
    const again = await intake(dir, { ...env, DATABASE_URL: 'embedded' }, 'org', 'create', slug);
    t.is(again.code, 1);
    t.regex(again.stderr, /slug .* is already taken/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('without redis-server, intake dev stops at once with the command that installs it', async (t) => {
  const dir = folder();
  // PATH without redis-server (node itself is run by its full path).
  const env = await machineWithoutServers({ PATH: dir, DATABASE_URL: TEST_DATABASE_URL });
  try {
    const result = await intake(dir, env, 'dev');
    t.is(result.code, 1);
    const install = installCommand(process.platform, process.getuid?.() ?? -1);
    t.truthy(install, 'this machine has a known package manager');
    t.is(
      result.stderr,
      `intake: no Redis answers at ${new URL(env.INTAKE_DEFAULT_REDIS_URL!).host} and REDIS_URL is unset, and redis-server is not installed to start one: ${install} (or set REDIS_URL)\n`,
    );
    t.false(existsSync(path.join(dir, '.intake')), 'nothing was started');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  t.is(installCommand('linux', 1000, { ID: 'debian' }), 'sudo apt-get install redis-server');
  t.is(installCommand('linux', 0, { ID: 'ubuntu', ID_LIKE: 'debian' }), 'apt-get install redis-server');
  t.is(installCommand('linux', 1000, { ID: 'linuxmint', ID_LIKE: 'ubuntu debian' }), 'sudo apt-get install redis-server');
  t.is(installCommand('darwin', 501), 'brew install redis');
  t.is(installCommand('linux', 1000, { ID: 'fedora' }), 'sudo dnf install redis');
});

test('the processes of a deployment start nothing: DATABASE_URL=embedded with none running is refused in one line', async (t) => {
  const dir = folder();
  const env = await machineWithoutServers({ DATABASE_URL: 'embedded' });
  try {
    for (const command of ['worker', 'gateway']) {
      const result = await intake(dir, env, command);
      t.is(result.code, 1, command);
      t.is(
        result.stderr,
        `intake: DATABASE_URL=embedded: no embedded PostgreSQL runs in .intake/postgres, and intake ${command} starts none: run npm start (intake dev) in this folder first, or set DATABASE_URL to a PostgreSQL URL\n`,
      );
    }
    t.false(existsSync(path.join(dir, '.intake')), 'nothing was started or written');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
