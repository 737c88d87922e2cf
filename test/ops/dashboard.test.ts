// The queue dashboard over real HTTP: basic auth, the queues it lists, read-only mode, and the
// `intake dashboard` / `intake dev` processes (readiness line, warnings, SIGTERM).
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Queue, Worker } from 'bullmq';
import type { Config } from '../../common/config.ts';
import { createLogger } from '../../common/logger.ts';
import { DEAD_LETTER_QUEUE, EVENTS_QUEUE, SERVICE_EVENTS_QUEUE } from '../../common/queues.ts';
import { createRedis } from '../../common/redis.ts';
import { startDashboard, type Dashboard } from '../../gateway/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { createDb } from '../../common/db.ts';
import { migrateOnce, testConfig, testEnv } from '../helpers/services.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/intake.js');
const PASSWORD = 'correct horse battery staple';
const basic = (user: string, password: string) => ({ authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` });
const admin = basic('admin', PASSWORD);

const opened: { close(): Promise<unknown> }[] = [];
test.after.always(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => {});
});

async function dashboard(overrides: Record<string, string> = {}): Promise<{ url: string; config: Config; board: Dashboard }> {
  const config = testConfig(testEnv({ DASHBOARD_PORT: '0', DASHBOARD_PASSWORD: PASSWORD, ...overrides }));
  const db = createDb(config);
  opened.push({ close: () => db.$disconnect() });
  const board = await startDashboard({ config, db, log: createLogger('silent', 'test-dashboard') });
  opened.push(board);
  return { url: `http://127.0.0.1:${board.port}`, config, board };
}

/** A job on the events queue that failed its only attempt, as a worker leaves it after the last retry. */
async function failedJob(config: Config): Promise<{ id: string; queue: Queue }> {
  const connection = createRedis(config, 'worker');
  const queue = new Queue(EVENTS_QUEUE, { connection, prefix: config.queuePrefix });
  opened.push({ close: async () => (await queue.obliterate({ force: true }), await queue.close(), connection.disconnect()) });
  const failing = new Worker(
    EVENTS_QUEUE,
    async () => {
      throw new Error('boom');
    },
    { connection, prefix: config.queuePrefix },
  );
  const failed = new Promise((resolve) => failing.once('failed', resolve));
  const job = await queue.add('event', { messageId: 'm-1' }, { jobId: 'job-1', attempts: 1 });
  await failed;
  await failing.close();
  return { id: job.id!, queue };
}

test('GET /healthz, /readyz and /metrics answer without credentials when a password is set', async (t) => {
  const { url } = await dashboard();
  const res = await request(url, '/healthz', { method: 'GET' });
  t.is(res.status, 200);
  t.deepEqual(res.json, { status: 'ok' });
  // Ready once its connections are up (right after start they may still be opening).
  const ready = await eventually(async () => {
    const reply = await request(url, '/readyz', { method: 'GET' });
    return reply.status === 200 ? reply : null;
  });
  t.deepEqual(ready?.json, { status: 'ready', postgres: true, redis: true });
  const metrics = await request(url, '/metrics', { method: 'GET' });
  t.is(metrics.status, 200);
  t.regex(metrics.text, /^intake_queue_jobs\{queue="events",state="waiting"\} \d+$/m);
  t.regex(metrics.text, /^process_resident_memory_bytes \d+/m);
  // Only GET, and nothing else of the dashboard without credentials.
  t.is((await request(url, '/metrics', { method: 'POST', body: {} })).status, 401);
});

test('without credentials: 401 with a Basic challenge, on the page and on the API', async (t) => {
  const { url } = await dashboard();
  for (const p of ['/', '/api/queues', '/queue/events', '/static/favicon-32x32.png']) {
    const res = await request(url, p, { method: 'GET' });
    t.is(res.status, 401, p);
    t.is(res.headers.get('www-authenticate'), 'Basic realm="intake"', p);
    t.false(res.text.includes('events'), p);
  }
});

test('wrong password, wrong user, malformed or non-Basic credentials: 401', async (t) => {
  const { url } = await dashboard();
  const attempts: Record<string, string>[] = [
    basic('admin', 'wrong'),
    basic('admin', PASSWORD + 'x'),
    basic('admin', PASSWORD.slice(0, -1)),
    basic('root', PASSWORD),
    basic('', PASSWORD),
    { authorization: `Basic ${Buffer.from(`admin${PASSWORD}`).toString('base64')}` }, // no colon
    { authorization: 'Basic !!!not-base64!!!' },
    { authorization: `Bearer ${PASSWORD}` },
    { authorization: '' },
  ];
  for (const headers of attempts) {
    const res = await request(url, '/api/queues', { method: 'GET', headers });
    t.is(res.status, 401, JSON.stringify(headers));
    t.is(res.headers.get('www-authenticate'), 'Basic realm="intake"');
  }
});

test('right credentials: the page loads and the API lists the product queues with their counts', async (t) => {
  const { url, config } = await dashboard();
  await failedJob(config);
  const page = await request(url, '/', { method: 'GET', headers: admin });
  t.is(page.status, 200);
  t.regex(page.headers.get('content-type') ?? '', /text\/html/);
  t.regex(page.text, /<title>intake queues<\/title>/);

  const api = await request(url, '/api/queues', { method: 'GET', headers: admin });
  t.is(api.status, 200);
  const queues = api.json.queues as { name: string; readOnlyMode: boolean; counts: Record<string, number> }[];
  t.deepEqual(queues.map((q) => q.name).sort(), [EVENTS_QUEUE, DEAD_LETTER_QUEUE, SERVICE_EVENTS_QUEUE].sort());
  t.true(queues.every((q) => q.readOnlyMode));
  // The counts come from this test's queue prefix: the dashboard reads the queues the product writes.
  t.is(queues.find((q) => q.name === EVENTS_QUEUE)!.counts.failed, 1);

  // The user name is configurable.
  const other = await dashboard({ DASHBOARD_USER: 'ops' });
  t.is((await request(other.url, '/api/queues', { method: 'GET', headers: basic('ops', PASSWORD) })).status, 200);
  t.is((await request(other.url, '/api/queues', { method: 'GET', headers: admin })).status, 401);
});

test('read-only (the default) refuses mutating API calls and leaves the job as it was', async (t) => {
  const { url, config } = await dashboard();
  const { id, queue } = await failedJob(config);
  for (const [method, p] of [
    ['PUT', `/api/queues/${EVENTS_QUEUE}/${id}/retry`],
    ['PUT', `/api/queues/${EVENTS_QUEUE}/${id}/clean`],
    ['PUT', `/api/queues/${EVENTS_QUEUE}/retry/failed`],
    ['PUT', `/api/queues/${EVENTS_QUEUE}/clean/failed`],
    ['PUT', `/api/queues/${EVENTS_QUEUE}/pause`],
    ['PUT', `/api/queues/${EVENTS_QUEUE}/empty`],
    ['POST', `/api/queues/${EVENTS_QUEUE}/add`],
  ]) {
    const res = await request(url, p, { method, headers: admin, body: method === 'POST' ? { name: 'x', data: {} } : undefined });
    t.is(res.status, 405, `${method} ${p}`);
    t.is(res.json?.error?.key, 'ERRORS.QUEUE_READ_ONLY');
  }
  t.is(await queue.getJobState(id), 'failed');
  t.false(await queue.isPaused());
});

test('DASHBOARD_READ_ONLY=false lets an operator retry a failed job', async (t) => {
  const { url, config } = await dashboard({ DASHBOARD_READ_ONLY: 'false' });
  const { id, queue } = await failedJob(config);
  const listed = await request(url, '/api/queues', { method: 'GET', headers: admin });
  t.true((listed.json.queues as { readOnlyMode: boolean }[]).every((q) => !q.readOnlyMode));
  // Still behind auth when writable.
  t.is((await request(url, `/api/queues/${EVENTS_QUEUE}/${id}/retry`, { method: 'PUT' })).status, 401);
  const res = await request(url, `/api/queues/${EVENTS_QUEUE}/${id}/retry`, { method: 'PUT', headers: admin });
  t.true(res.status >= 200 && res.status < 300, String(res.status));
  t.is(await queue.getJobState(id), 'waiting');
});

test('DASHBOARD_READ_ONLY and DASHBOARD_USER are validated at start', (t) => {
  t.throws(() => testConfig(testEnv({ DASHBOARD_READ_ONLY: 'no' })), { message: /DASHBOARD_READ_ONLY="no": must be true or false/ });
  t.throws(() => testConfig(testEnv({ DASHBOARD_USER: 'a:b' })), { message: /DASHBOARD_USER/ });
  t.true(testConfig(testEnv()).dashboardReadOnly);
});

interface Started {
  output(): string;
  exited: Promise<number | string | null>;
  stop(): Promise<number | string | null>;
}

/** `intake <command>` as a child process, resolved once its output matches `ready`. */
function spawnIntake(command: string, env: Record<string, string>, ready: RegExp): Promise<Started> {
  const child = spawn(process.execPath, [bin, command], { env: { ...process.env, ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  const stop = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    return exited;
  };
  opened.push({ close: stop });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`intake ${command} did not become ready:\n${out}`));
    }, 60_000);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      if (!ready.test(out)) return;
      clearTimeout(timer);
      resolve({ output: () => out, exited, stop });
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`intake ${command} exited early:\n${out}`));
    });
  });
}

const portOf = (out: string, msg: string) => Number(new RegExp(`"port":(\\d+)[^\\n]*"msg":"${msg}"`).exec(out)?.[1]);

test('`intake dashboard` without DASHBOARD_PASSWORD warns that it is unauthenticated, serves, and stops on SIGTERM', async (t) => {
  const child = await spawnIntake('dashboard', testEnv({ DASHBOARD_PORT: '0' }), /"msg":"dashboard listening"/);
  const lines = child
    .output()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
  const warning = lines.find((l) => /dashboard is unauthenticated/.test(l.msg));
  t.truthy(warning, child.output());
  t.is(warning.level, 40);
  const url = `http://127.0.0.1:${portOf(child.output(), 'dashboard listening')}`;
  const res = await request(url, '/api/queues', { method: 'GET' });
  t.is(res.status, 200);
  t.deepEqual((res.json.queues as { name: string }[]).map((q) => q.name).sort(), [EVENTS_QUEUE, DEAD_LETTER_QUEUE, SERVICE_EVENTS_QUEUE].sort());
  t.is(await child.stop(), 0);
  t.regex(child.output(), /"msg":"dashboard stopped"/);
});

test('`intake dashboard` with DASHBOARD_PASSWORD gives no warning and asks for credentials', async (t) => {
  const child = await spawnIntake('dashboard', testEnv({ DASHBOARD_PORT: '0', DASHBOARD_PASSWORD: PASSWORD }), /"msg":"dashboard listening"/);
  t.notRegex(child.output(), /unauthenticated/);
  const url = `http://127.0.0.1:${portOf(child.output(), 'dashboard listening')}`;
  t.is((await request(url, '/api/queues', { method: 'GET' })).status, 401);
  t.is((await request(url, '/api/queues', { method: 'GET', headers: admin })).status, 200);
  t.is(await child.stop(), 0);
});

test('`intake dev` with DASHBOARD_PORT taken warns and keeps the gateway and worker running', async (t) => {
  await migrateOnce();
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => new Promise((resolve) => squatter.close(resolve)) });
  const taken = (squatter.address() as net.AddressInfo).port;

  const child = await spawnIntake('dev', testEnv({ DASHBOARD_PORT: String(taken) }), /"msg":"dashboard not started/);
  t.regex(child.output(), new RegExp(`"level":40[^\\n]*"port":${taken}[^\\n]*"msg":"dashboard not started: DASHBOARD_PORT is in use"`));
  t.regex(child.output(), /"msg":"worker started"/);
  t.notRegex(child.output(), /unauthenticated/); // nothing about a dashboard that is not running
  const gateway = `http://127.0.0.1:${portOf(child.output(), 'gateway listening')}`;
  t.is((await request(gateway, '/healthz', { method: 'GET' })).status, 200);
  t.is(await child.stop(), 0, child.output());
});

test('`intake dashboard` with DASHBOARD_PORT taken fails instead of running without its one job', async (t) => {
  const squatter = net.createServer();
  await new Promise<void>((resolve) => squatter.listen(0, '127.0.0.1', resolve));
  opened.push({ close: () => new Promise((resolve) => squatter.close(resolve)) });
  const taken = (squatter.address() as net.AddressInfo).port;
  const child = spawn(process.execPath, [bin, 'dashboard'], { env: { ...process.env, ...testEnv({ DASHBOARD_PORT: String(taken) }) }, stdio: 'pipe' });
  let err = '';
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise((resolve) => child.once('exit', resolve));
  t.not(code, 0);
  t.regex(err, /EADDRINUSE/);
});
