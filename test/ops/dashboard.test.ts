// The queue dashboard over real HTTP: closed by default (loopback, job data hidden without a
// password, no other address without one), basic auth, the queues it lists, its icon, pages that
// name no other host, read-only mode, and the `intake dashboard` / `intake dev` processes
// (readiness line, warnings, SIGTERM).
import { spawn } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Queue, Worker } from 'bullmq';
import type { Config } from '../../platform/config.ts';
import { createLogger } from '../../platform/logger.ts';
import { DEAD_LETTER_QUEUE, EVENTS_QUEUE, SERVICE_EVENTS_QUEUE } from '../../platform/queues.ts';
import { createRedis } from '../../platform/redis.ts';
import { exposureProblem, HIDDEN_JOB_DATA, isLoopback, startDashboard, type Dashboard } from '../../gateway/dashboard.ts';
import { eventually } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { createDb } from '../../platform/db.ts';
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

/** An address of this host that is not loopback (how another machine would reach it), if it has one. */
const outside = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

/** Whether a TCP connection to host:port is accepted. */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host, () => (socket.destroy(), resolve(true)));
    socket.on('error', () => resolve(false));
    socket.setTimeout(3000, () => (socket.destroy(), resolve(false)));
  });
}

/** A completed and a failed job on the events queue whose data and return value hold a user's data. */
async function jobsWithPersonalData(config: Config): Promise<void> {
  const connection = createRedis(config, 'worker');
  const queue = new Queue(EVENTS_QUEUE, { connection, prefix: config.queuePrefix });
  opened.push({ close: async () => (await queue.obliterate({ force: true }), await queue.close(), connection.disconnect()) });
  const data = (n: number) => ({
    events: [{ messageId: `secret-message-${n}`, payload: `{"userId":"secret-user-${n}","properties":{"plan":"secret-plan"}}` }],
  });
  let runs = 0;
  const worker = new Worker(
    EVENTS_QUEUE,
    async (job) => {
      if (++runs === 2) throw new Error('boom');
      return { echoed: job.data.events[0].messageId };
    },
    { connection, prefix: config.queuePrefix },
  );
  const completed = new Promise((resolve) => worker.once('completed', resolve));
  const failed = new Promise((resolve) => worker.once('failed', resolve));
  await queue.add('track (1 event)', data(1), { jobId: 'done-1', attempts: 1 });
  await completed;
  await queue.add('track (1 event)', data(2), { jobId: 'failed-1', attempts: 1 });
  await failed;
  await worker.close();
}

/** The events queue's jobs of one status as the dashboard's API lists them, and the raw answer. */
async function listed(url: string, status: string, headers: Record<string, string> = {}) {
  const res = await request(url, `/api/queues?activeQueue=${EVENTS_QUEUE}&status=${status}`, { method: 'GET', headers });
  const queue = (res.json?.queues as { name: string; jobs: Record<string, unknown>[] }[] | undefined)?.find((q) => q.name === EVENTS_QUEUE);
  return { status: res.status, text: res.text, jobs: queue?.jobs ?? [] };
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

// ---- closed by default --------------------------------------------------------------------

test('loopback addresses: 127.0.0.0/8, ::1 in any spelling, localhost; nothing else', (t) => {
  for (const host of ['127.0.0.1', '127.1.2.3', '::1', '0:0:0:0:0:0:0:1', '::ffff:127.0.0.1', 'localhost']) t.true(isLoopback(host), host);
  for (const host of ['0.0.0.0', '::', '192.0.2.2', '10.0.0.1', '::ffff:10.0.0.1', 'fe80::1', 'example.com', 'localhost.example.com', '128.0.0.1']) {
    t.false(isLoopback(host), host);
  }
});

test('the rule: a password, or loopback and read-only', (t) => {
  const rule = (dashboardHost: string, dashboardPassword: string, dashboardReadOnly = true) =>
    exposureProblem({ dashboardHost, dashboardPassword, dashboardReadOnly });
  t.is(rule('127.0.0.1', ''), null);
  t.is(rule('::1', ''), null);
  t.is(rule('0.0.0.0', 'pw'), null);
  t.is(rule('127.0.0.1', 'pw', false), null);
  t.is(rule('0.0.0.0', ''), 'DASHBOARD_HOST=0.0.0.0 is not a loopback address: set DASHBOARD_PASSWORD to listen there, or leave DASHBOARD_HOST at 127.0.0.1');
  t.regex(rule('192.0.2.2', '') ?? '', /^DASHBOARD_HOST=192\.0\.2\.2 is not a loopback address: set DASHBOARD_PASSWORD/);
  t.is(rule('127.0.0.1', '', false), 'DASHBOARD_READ_ONLY=false needs DASHBOARD_PASSWORD: without one the dashboard hides job data and stays read-only');
});

test("by default it listens on loopback only, also when HOST (the gateway's) is 0.0.0.0", async (t) => {
  const config = testConfig(testEnv({ DASHBOARD_PORT: '0', HOST: '0.0.0.0' }));
  t.is(config.dashboardHost, '127.0.0.1');
  t.is(config.dashboardPassword, '');
  const { board } = await dashboard({ HOST: '0.0.0.0', DASHBOARD_PASSWORD: '' });
  t.true(await accepts('127.0.0.1', board.port));
  if (outside === undefined) return t.log('this host has no non-loopback IPv4 address: only the loopback side is checked');
  t.false(await accepts(outside, board.port), `not reachable at ${outside}`);
});

test('without a password: queues, counts and job names show; job data and return values do not', async (t) => {
  const { url, config } = await dashboard({ DASHBOARD_PASSWORD: '' });
  await jobsWithPersonalData(config);
  const queues = await request(url, '/api/queues', { method: 'GET' });
  t.is(queues.status, 200);
  const counts = (queues.json.queues as { name: string; counts: Record<string, number> }[]).find((q) => q.name === EVENTS_QUEUE)!.counts;
  t.like(counts, { completed: 1, failed: 1 });
  for (const status of ['completed', 'failed', 'latest']) {
    const { status: code, text, jobs } = await listed(url, status);
    t.is(code, 200);
    t.true(jobs.length > 0, status);
    for (const job of jobs) {
      t.is(job.name, 'track (1 event)');
      t.is(job.data, HIDDEN_JOB_DATA);
      t.true(job.returnValue === HIDDEN_JOB_DATA, JSON.stringify(job.returnValue));
    }
    t.false(text.includes('secret'), `${status}: ${text.slice(0, 300)}`);
  }
  // One job by id: the same.
  const one = await request(url, `/api/queues/${EVENTS_QUEUE}/done-1`, { method: 'GET' });
  t.is(one.status, 200);
  t.is(one.json.job.data, HIDDEN_JOB_DATA);
  t.false(one.text.includes('secret'));
});

test('with a password: unauthenticated requests get 401, authenticated ones see the job data', async (t) => {
  const { url, config } = await dashboard();
  await jobsWithPersonalData(config);
  const refused = await request(url, `/api/queues?activeQueue=${EVENTS_QUEUE}&status=completed`, { method: 'GET' });
  t.is(refused.status, 401);
  t.false(refused.text.includes('secret'));
  const done = await listed(url, 'completed', admin);
  t.is(done.status, 200);
  t.deepEqual(done.jobs[0].data, { events: [{ messageId: 'secret-message-1', payload: '{"userId":"secret-user-1","properties":{"plan":"secret-plan"}}' }] });
  t.deepEqual(done.jobs[0].returnValue, { echoed: 'secret-message-1' });
  const failed = await listed(url, 'failed', admin);
  t.is((failed.jobs[0].data as { events: { messageId: string }[] }).events[0].messageId, 'secret-message-2');
});

test('with a password it may listen on every address: reachable from outside loopback, behind basic auth', async (t) => {
  const { board } = await dashboard({ DASHBOARD_HOST: '0.0.0.0' });
  const at = `http://${outside ?? '127.0.0.1'}:${board.port}`;
  t.is((await request(at, '/api/queues', { method: 'GET' })).status, 401);
  t.is((await request(at, '/api/queues', { method: 'GET', headers: admin })).status, 200);
});

test('on a non-loopback address without a password it refuses to start, before taking the port', async (t) => {
  for (const host of ['0.0.0.0', outside ?? '::']) {
    const config = testConfig(testEnv({ DASHBOARD_PORT: '0', DASHBOARD_HOST: host }));
    await t.throwsAsync(startDashboard({ config, db: undefined as never, log: createLogger('silent', 'test-dashboard') }), {
      message: new RegExp(`^DASHBOARD_HOST=${host.replaceAll('.', '\\.')} is not a loopback address: set DASHBOARD_PASSWORD`),
    });
  }
  // Nor writable without one.
  const writable = testConfig(testEnv({ DASHBOARD_PORT: '0', DASHBOARD_READ_ONLY: 'false' }));
  await t.throwsAsync(startDashboard({ config: writable, db: undefined as never, log: createLogger('silent', 'test-dashboard') }), {
    message: /^DASHBOARD_READ_ONLY=false needs DASHBOARD_PASSWORD/,
  });
});

test('`intake dashboard` on 0.0.0.0 without DASHBOARD_PASSWORD: one line naming the setting, exit 1', async (t) => {
  for (const [command, extra] of [
    ['dashboard', {}],
    ['dev', { DASHBOARD_PORT: '0' }],
  ] as const) {
    const child = spawn(process.execPath, [bin, command], {
      env: { ...process.env, ...testEnv({ DASHBOARD_HOST: '0.0.0.0', ...extra }), LOG_LEVEL: 'silent' },
      stdio: 'pipe',
    });
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    t.is(code, 1, `${command}: ${err}`);
    t.is(
      err,
      'intake: DASHBOARD_HOST=0.0.0.0 is not a loopback address: set DASHBOARD_PASSWORD to listen there, or leave DASHBOARD_HOST at 127.0.0.1\n',
      command,
    );
  }
});

// ---- with a password ---------------------------------------------------------------------

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

test('the icon answers at /favicon.ico (and as SVG and PNG) without credentials, and every page links to it', async (t) => {
  const { url } = await dashboard();
  for (const [p, type, magic] of [
    ['/favicon.ico', 'image/x-icon', Buffer.from([0, 0, 1, 0])],
    ['/favicon.png', 'image/png', Buffer.from('\x89PNG', 'latin1')],
    ['/favicon.svg', 'image/svg+xml', Buffer.from('<svg ')],
  ] as const) {
    const res = await fetch(url + p);
    t.is(res.status, 200, p);
    t.is(res.headers.get('content-type'), type, p);
    const bytes = Buffer.from(await res.arrayBuffer());
    t.true(bytes.subarray(0, magic.length).equals(magic), p);
  }
  for (const p of ['/', `/queue/${EVENTS_QUEUE}`, '/live/events']) {
    const page = await request(url, p, { method: 'GET', headers: admin });
    t.regex(page.text, /<link rel="icon" type="image\/svg\+xml"[^>]* href="\/favicon\.svg"/, p);
  }
});

test("the pages name no other host; bull-board's first screen has the live view's links; a Content-Security-Policy of 'self'", async (t) => {
  const { url } = await dashboard();
  for (const p of ['/', `/queue/${EVENTS_QUEUE}`, '/live/events', '/live/identify', '/live/rates', '/live/dead-letters']) {
    const page = await request(url, p, { method: 'GET', headers: admin });
    t.is(page.status, 200, p);
    t.false(page.text.includes('googleapis'), p);
    // Every address the page loads or links to is a path of this origin.
    const addresses = [...page.text.matchAll(/\b(?:href|src|action)\s*=\s*["']([^"']*)["']/gi)].map((m) => m[1]);
    t.true(addresses.length > 0, p);
    t.deepEqual(
      addresses.filter((a) => !/^(?:\/(?!\/)|static\/|\?)/.test(a)),
      [],
      p,
    );
    const csp = page.headers.get('content-security-policy') ?? '';
    for (const directive of ["default-src 'self'", "connect-src 'self'", "font-src 'self'", "img-src 'self' data:"])
      t.true(csp.includes(directive), `${p}: ${csp}`);
    t.regex(csp, /script-src 'self'( 'sha256-[A-Za-z0-9+/]+=*')*(;|$)/);
  }
  const first = await request(url, '/', { method: 'GET', headers: admin });
  const bar = /<nav class="intake-nav"[^>]*>(.*?)<\/nav>/.exec(first.text)?.[1] ?? '';
  t.regex(bar, /<a href="\/live\/events">Events<\/a>/);
  t.regex(bar, /<a href="\/" class="on" aria-current="page">Queues<\/a>/);
  const live = await request(url, '/live/events', { method: 'GET', headers: admin });
  t.regex(live.text, /<a href="\/">Queues<\/a>/);
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
  t.is(lines.find((l) => l.msg === 'dashboard listening').host, '127.0.0.1');
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

test('`intake dev` says where each part answers before any JSON log line, as a terminal shows both streams', async (t) => {
  await migrateOnce();
  // stdout and stderr in one pipe, as on a terminal: the order read is the order written.
  const env = { ...process.env, ...testEnv({ DASHBOARD_PORT: '0' }), LOG_LEVEL: 'info' };
  const child = spawn('sh', ['-c', 'exec "$0" "$@" 2>&1', process.execPath, bin, 'dev'], { env, stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(signal ?? code)));
  opened.push({ close: () => (child.exitCode === null && child.signalCode === null && child.kill('SIGTERM'), exited) });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  t.true(await eventually(async () => /"msg":"dashboard listening"/.test(out) && /worker metrics/.test(out), { timeoutMs: 60_000 }), out);
  const summary = out.indexOf('intake is running');
  t.true(summary >= 0 && summary < out.indexOf('{"level"'), out);
  const gateway = portOf(out, 'gateway listening');
  const board = portOf(out, 'dashboard listening');
  const metrics = Number(/"metricsPort":(\d+)[^\n]*"msg":"worker started"/.exec(out)?.[1]);
  for (const line of [
    `  gateway           http://127.0.0.1:${gateway}\n`,
    `  dashboard         http://127.0.0.1:${board}/\n`,
    `  live view         http://127.0.0.1:${board}/live\n`,
    `  gateway metrics   http://127.0.0.1:${gateway}/metrics\n`,
    `  worker metrics    http://127.0.0.1:${metrics}/metrics\n`,
  ])
    t.true(out.includes(line), `${line}in:\n${out}`);
  // The ports any free port took (PORT=0), and each URL answers.
  t.is((await request(`http://127.0.0.1:${gateway}`, '/healthz', { method: 'GET' })).status, 200);
  t.is((await request(`http://127.0.0.1:${board}`, '/live', { method: 'GET' })).status, 200);
  t.is((await request(`http://127.0.0.1:${metrics}`, '/metrics', { method: 'GET' })).status, 200);
  child.kill('SIGTERM');
  t.is(await exited, 0, out);
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
