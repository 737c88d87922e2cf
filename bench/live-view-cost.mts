// `node --import tsx bench/live-view-cost.mts [gateway|views]`: what the dashboard's live view costs.
//
// `gateway` (the default): what recording for the view costs the API. One gateway process (and a
// worker, so Track's queue drains), with the live recorder as shipped (LIVE_IDENTIFY_CALLS=200)
// and with Identify calls not recorded (0), alternately, ROUNDS rounds of wrk per API and
// setting; prints the median requests per second of each and the median CPU the gateway process
// spent per request (read from /proc: on a shared machine throughput follows the neighbours'
// load, a request's own CPU much less). Rates are recorded either way (every 10 s, from counters
// the gateway keeps anyway).
//
// `views`: what a view costs the dashboard while the queue is full (docs/operations.md, "Live
// view"). No worker runs. A dashboard process serves each page once while the queue is empty
// (loading each page's code and queries); then a gateway queues QUEUED_EVENTS Track events of
// EVENT_KB each in one environment and one event in another, and /live/events is asked for by
// one viewer VIEW_ROUNDS times, by a viewer of the other environment, then by VIEWERS viewers at
// once VIEW_ROUNDS times, each round 2.5 s after the last (longer than a shared read lives).
// Prints each view's time, how many of the newest 50 queued events it lists as pending with
// their messageId, name and user, and the dashboard's RSS before the events were queued and at
// its highest (sampled every 20 ms).
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { loadConfig } from '../platform/config.ts';
import { createDb } from '../platform/db.ts';
import { migrate } from '../cli/migrate.ts';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { loadQueueModules, openOperator } from '../operations/operator.ts';
import { withCpu } from './cpu-usage.mts';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const SECONDS = Number(process.env.SECONDS ?? 8);
const PREFIX = `bench-live-${randomBytes(3).toString('hex')}`;

await migrate(DATABASE_URL);
const env = { ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: PREFIX, LOG_LEVEL: 'warn', HOST: '127.0.0.1', INTAKE_ENV_FILE: '' };
const config = loadConfig(env);
const operator = openOperator(config, createDb(config), await loadQueueModules());
const slug = `bench-live-${randomBytes(3).toString('hex')}`;
await orgCreate(operator, [slug]);
const { key } = await keyCreate(operator, [slug]);

function start(command: string, extra: Record<string, string>, ready: RegExp): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['bin/intake.js', command], { env: { ...env, LOG_LEVEL: 'info', ...extra }, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    child.stdout!.on('data', (c: Buffer) => {
      out += c;
      if (ready.test(out)) resolve({ child, port: Number(/"port":(\d+)/.exec(out)?.[1] ?? 0) });
    });
    child.once('exit', (code) => reject(new Error(`${command} exited ${code}:\n${out}`)));
  });
}

const stop = (child: ChildProcess) => new Promise((resolve) => (child.once('exit', resolve), child.kill('SIGTERM')));

function wrk(script: string, port: number, api: string): Promise<{ rps: number; requests: number }> {
  const args = ['-t', '2', '-c', '32', '-d', `${SECONDS}s`, '--timeout', '10s', '-s', `bench/wrk/${script}`, `http://127.0.0.1:${port}/api/${api}/${slug}`];
  return new Promise((resolve, reject) => {
    const child = spawn('wrk', args, {
      env: { ...process.env, LUA_PATH: 'bench/wrk/?.lua;;', BENCH_API_KEY: key, BENCH_RUN_ID: randomBytes(4).toString('hex') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.once('exit', () => {
      const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
      const requests = /(\d+) requests in/.exec(out)?.[1];
      if (rps && requests) resolve({ rps: Number(rps), requests: Number(requests) });
      else reject(new Error(out));
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function gatewayScenario(): Promise<void> {
  const worker = await start('worker', { WORKER_METRICS_PORT: '0' }, /"msg":"worker started"/);
  const results: Record<string, number[]> = {};
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const calls of round % 2 ? ['0', '200'] : ['200', '0']) {
        const gateway = await start('gateway', { PORT: '0', LIVE_IDENTIFY_CALLS: calls, GATEWAY_PROCESSES: '1' }, /"msg":"gateway listening"/);
        for (const [api, script] of [
          ['identify', 'identify.lua'],
          ['track', 'track.lua'],
        ]) {
          const { rps, requests, cpu } = await withCpu(gateway.child.pid!, () => wrk(script, gateway.port, api));
          const cpuUs = Math.round((cpu.server * 1000) / requests);
          (results[`${api} LIVE_IDENTIFY_CALLS=${calls} req/s`] ??= []).push(rps);
          (results[`${api} LIVE_IDENTIFY_CALLS=${calls} gateway CPU µs/request`] ??= []).push(cpuUs);
          console.log(`round ${round + 1} ${api} LIVE_IDENTIFY_CALLS=${calls}: ${rps} req/s, gateway CPU ${cpuUs} µs/request`);
        }
        await stop(gateway.child);
      }
    }
  } finally {
    await stop(worker.child);
  }
  for (const [name, values] of Object.entries(results)) console.log(`${name}: median ${median(values)} (${values.join(', ')})`);
}

const QUEUED_EVENTS = Number(process.env.QUEUED_EVENTS ?? 300);
const EVENT_KB = Number(process.env.EVENT_KB ?? 500);
const VIEWERS = Number(process.env.VIEWERS ?? 6);
const VIEW_ROUNDS = Number(process.env.VIEW_ROUNDS ?? 5);
const PASSWORD = 'bench live view';

/** About `kb` KB of Segment-shaped properties (an order's lines): JSON of many small objects, not one long string. */
function properties(kb: number, seed: string): Record<string, unknown> {
  const lines: Record<string, unknown>[] = [];
  let size = 0;
  for (let i = 0; size < kb * 1024; i++) {
    const line = { sku: `${seed}-${i}`, name: `Item "${i}" \\ ${randomBytes(12).toString('base64')}`, price: i * 1.25, tags: ['a', 'b'], meta: { n: i } };
    size += JSON.stringify(line).length + 1;
    lines.push(line);
  }
  return { orderId: seed, lines };
}

async function send(port: number, apiKey: string, org: string, bodies: object[], concurrency: number): Promise<void> {
  let next = 0;
  const one = async () => {
    while (next < bodies.length) {
      const body = JSON.stringify(bodies[next++]);
      const res = await fetch(`http://127.0.0.1:${port}/api/track/${org}`, {
        method: 'POST',
        headers: { 'x-api-key': apiKey, 'content-type': 'application/json' },
        body,
      });
      if (res.status !== 202) throw new Error(`track: ${res.status} ${await res.text()}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, one));
}

/** VmRSS of a process in MB, sampled until stop() (which returns the highest). */
function rssOf(pid: number) {
  const read = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  let peak = read();
  const timer = setInterval(() => (peak = Math.max(peak, read())), 20).unref();
  return { now: read, stop: () => (clearInterval(timer), Math.max(peak, read())) };
}

async function view(port: number, path: string): Promise<{ ms: number; status: number; html: string }> {
  const started = performance.now();
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: { authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString('base64')}` } });
  const html = await res.text();
  return { ms: Math.round(performance.now() - started), status: res.status, html };
}

/** The rows of the events table: [messageId, event, user, status]. */
function rowsOf(html: string): string[][] {
  const text = (cell: string) =>
    cell
      .replace(/<[^>]*>/g, '')
      .replace(/&quot;/g, '"')
      .replace(/&#39;/g, "'")
      .replace(/&lt;/g, '<')
      .replace(/&gt;/g, '>')
      .replace(/&amp;/g, '&')
      .trim();
  return [...html.matchAll(/<tr>(.*?)<\/tr>/g)]
    .map(([, tr]) => [...tr.matchAll(/<td[^>]*>(.*?)<\/td>/g)].map(([, td]) => text(td)))
    .filter((r) => r.length)
    .map((r) => [r[2], r[1], r[3], r[4]]);
}

async function viewsScenario(): Promise<void> {
  const other = `bench-live-${randomBytes(3).toString('hex')}`;
  await orgCreate(operator, [other]);
  const otherKey = (await keyCreate(operator, [other])).key;
  const gateway = await start('gateway', { PORT: '0', GATEWAY_PROCESSES: '1' }, /"msg":"gateway listening"/);
  const dashboard = await start('dashboard', { DASHBOARD_PORT: '0', DASHBOARD_PASSWORD: PASSWORD }, /"msg":"dashboard listening"/);
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    const rss = rssOf(dashboard.child.pid!);
    const started = rss.now();
    // Every page once while the queue is empty: the first request of each loads its code and
    // PostgreSQL's queries, whatever the queues hold. What grows after is what the queue costs.
    for (const warm of [`/live/events?env=${slug}`, `/live/events?env=${other}`, `/live/identify?env=${slug}`, '/live/rates', '/live/dead-letters']) {
      if ((await view(dashboard.port, `${warm}${warm.includes('?') ? '&' : '?'}refresh=0`)).status !== 200) throw new Error(`warm-up: ${warm}`);
    }
    await pause(1000);
    const before = rss.now();

    const run = randomBytes(3).toString('hex');
    const bodies = Array.from({ length: QUEUED_EVENTS }, (_, i) => ({
      type: 'track',
      messageId: `${run}-${i}`,
      event: `Order Completed ${i}`,
      userId: `user-${i % 20}`,
      timestamp: new Date(Date.now() - 60_000).toISOString(),
      properties: properties(EVENT_KB, `${run}-${i}`),
    }));
    const queuedAt = performance.now();
    await send(gateway.port, key, slug, bodies, 6);
    await send(
      gateway.port,
      otherKey,
      other,
      [{ type: 'track', messageId: `${run}-other`, event: 'Other', anonymousId: 'anon-1', timestamp: new Date().toISOString() }],
      1,
    );
    const counts = await operator.eventsQueue().getJobCounts('wait', 'active', 'delayed');
    const bytes = await (await operator.redis()).info('memory').then((info: string) => /used_memory:(\d+)/.exec(info)?.[1]);
    console.log(
      `queued ${QUEUED_EVENTS} events of ${EVENT_KB} KB in ${Math.round(performance.now() - queuedAt)} ms: ${counts.wait} waiting batch jobs (Redis used_memory ${Math.round(Number(bytes) / 1_048_576)} MB)`,
    );
    console.log(`dashboard RSS: ${started.toFixed(0)} MB started, ${before.toFixed(0)} MB after each page once, before the events were queued`);

    const page = `/live/events?env=${slug}&refresh=0`;
    const newest = bodies.slice(-50);
    const single: string[] = [];
    for (let i = 0; i < VIEW_ROUNDS; i++) {
      const { ms, status, html } = await view(dashboard.port, page);
      if (status !== 200) throw new Error(`view: ${status}`);
      const unread = /(\d+) queued jobs? \([\d.]+ MB\) not read yet/.exec(html)?.[1] ?? '0';
      const shown = rowsOf(html);
      const listed = newest.filter((b) => shown.some((r) => r[0] === b.messageId && r[1] === b.event && r[2] === b.userId && r[3] === 'pending')).length;
      single.push(`${ms} ms (${listed} of the newest 50 listed as pending with messageId, name and user; ${unread} jobs left unread)`);
      // Apart by more than a shared read's life (2 s): each is a read of its own.
      await pause(2500);
    }
    console.log(`one viewer:\n  ${single.join('\n  ')}`);
    const unrelated = await view(dashboard.port, `/live/events?env=${other}&refresh=0`);
    console.log(`another environment: ${unrelated.ms} ms, rows ${JSON.stringify(rowsOf(unrelated.html))}`);
    const afterOne = rss.now();
    const together: number[] = [];
    for (let round = 0; round < VIEW_ROUNDS; round++) {
      const views = await Promise.all(Array.from({ length: VIEWERS }, () => view(dashboard.port, page)));
      together.push(...views.map((v) => v.ms));
      await pause(2500);
    }
    const peak = rss.stop();
    console.log(`${VIEWERS} viewers at once, ${VIEW_ROUNDS} times 2.5 s apart: slowest ${Math.max(...together)} ms, median ${median(together)} ms`);
    console.log(
      `dashboard RSS: ${before.toFixed(0)} MB before, ${afterOne.toFixed(0)} MB after one viewer, ${peak.toFixed(0)} MB at its highest (+${(peak - before).toFixed(0)} MB)`,
    );
  } finally {
    await stop(dashboard.child);
    await stop(gateway.child);
  }
}

try {
  if (process.argv[2] === 'views') await viewsScenario();
  else await gatewayScenario();
} finally {
  await operator.eventsQueue().obliterate({ force: true });
  await operator.close();
}
