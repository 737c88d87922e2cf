// npm run bench — measures intake on this machine against the local PostgreSQL and Redis.
// It starts what it measures (gateway, worker, the reference server) as separate processes,
// drives load with autocannon from this process, and prints one table plus a JSON line per
// scenario. Every intake throughput figure is also given as a ratio to the reference
// "Koa + one queue.add() per request" server measured in the same run, so the figures survive
// a noisy machine.
//
// BENCH_DURATION (seconds per load scenario, default 10), BENCH_CONNECTIONS (default 50),
// BENCH_PROFILE=1 (CPU profile of the gateway, summarized at the end),
// BENCH_DRAIN_EVENTS (default 100000), BENCH_ONLY (comma list of scenario names: reference,
// track, identify, profiles, drain, e2e, memory), BENCH_MEMORY_SECONDS (default 300).
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { Job } from 'bullmq';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { openOperator } from '../cli/operator.ts';
import { loadConfig } from '../common/config.ts';
import { createDb } from '../common/db.ts';
import { migrate } from '../common/migrate.ts';
import { createEventsQueue, jobIdFor, type EventJob } from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';
import { runScript, startProcess, stopProcess } from './processes.mts';
import { summarizeProfile } from './cpu-profile.mts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const DRAIN_EVENTS = Number(process.env.BENCH_DRAIN_EVENTS ?? 100_000);
const ONLY = process.env.BENCH_ONLY?.split(',');
const PROFILE = process.env.BENCH_PROFILE === '1';
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const prefix = `bench-${randomBytes(4).toString('hex')}`;

interface Row {
  scenario: string;
  [figure: string]: string | number;
}
const rows: Row[] = [];
const children: ChildProcess[] = [];

/** One profile per thread; the main thread's is the big one (tsx's loader thread idles). */
function printProfile(dir: string, label: string) {
  const files = readdirSync(dir).map((f) => path.join(dir, f));
  const main = files.sort((a, b) => statSync(b).size - statSync(a).size)[0];
  if (main) console.error(`\n${label}: ${summarizeProfile(main)}`);
}

function report(row: Row) {
  rows.push(row);
  console.log(JSON.stringify({ bench: row.scenario, ...row }));
}

const start = (args: string[], env: Record<string, string>, ready: RegExp) => startProcess(args, env, ready, children);
const stop = stopProcess;

const serviceEnv = (extra: Record<string, string> = {}) => ({
  DATABASE_URL,
  REDIS_URL,
  QUEUE_PREFIX: prefix,
  PORT: '0',
  HOST: '127.0.0.1',
  // As deployed: one log line per request and per job.
  LOG_LEVEL: 'info',
  ...extra,
});

const PROPERTIES = JSON.stringify({
  plan: 'pro',
  price: 49.5,
  currency: 'EUR',
  items: [
    { sku: 'A-100', qty: 2 },
    { sku: 'B-7', qty: 1 },
  ],
  campaign: 'winter-sale',
  referrer: 'https://example.com/landing?utm_source=newsletter',
});

/** ~400-byte Track bodies, each with a new messageId. */
function trackRequests(runId: string) {
  let n = 0;
  return [
    {
      method: 'POST' as const,
      setupRequest: (req: { body?: string }) => {
        n++;
        req.body = `{"type":"track","messageId":"${runId}-${n}","event":"Order Completed","userId":"user-${n % 10000}","timestamp":"2026-01-01T10:00:00.000Z","properties":${PROPERTIES}}`;
        return req;
      },
    },
  ];
}

async function load(
  url: string,
  opts: { headers?: Record<string, string>; requests?: unknown[]; method?: 'GET' | 'POST'; connections?: number; duration?: number; overallRate?: number },
) {
  const result = await autocannon({
    url,
    connections: opts.connections ?? CONNECTIONS,
    duration: opts.duration ?? DURATION,
    headers: { 'content-type': 'application/json', ...opts.headers },
    method: opts.method ?? 'POST',
    requests: opts.requests as never,
    overallRate: opts.overallRate,
  });
  const ok = result['2xx'];
  return {
    reqPerSec: Math.round(ok / result.duration),
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
    ok,
    duration: result.duration,
  };
}

async function main() {
  console.error(`bench: ${DURATION}s per scenario, ${CONNECTIONS} connections, prefix ${prefix}`);
  await migrate(DATABASE_URL);
  const config = loadConfig({ ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: prefix });
  const db = createDb(config);
  const operator = openOperator(config, db);
  const slug = `bench-${randomBytes(3).toString('hex')}`;
  await orgCreate(operator, [slug]);
  const { key } = await keyCreate(operator, [slug]);
  const env = await db.environment.findUniqueOrThrow({ where: { pathValue: slug } });
  const headers = { 'x-api-key': key };
  // The 5-minute memory run only when asked for by name.
  const want = (name: string) => (ONLY ? ONLY.includes(name) : name !== 'memory');
  const redis = createRedis(config, 'worker');
  const queue = createEventsQueue(config, redis);
  const countRows = async () => Number((await db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM events WHERE environment_id = ${env.id}::uuid`)[0].n);

  // The reference and intake's Track are measured alternately, BENCH_ROUNDS (3) rounds each,
  // and compared by their medians: this VM's speed drifts by tens of percent within minutes.
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
  let reference: Awaited<ReturnType<typeof load>> | undefined;
  let trackMax = 0;
  // BENCH_PROFILE=1: the gateway runs under `node --cpu-prof`; its profile is summarized at the end.
  // The drain's worker is profiled too, into its own directory.
  const profileDir = PROFILE ? mkdtempSync(path.join(tmpdir(), 'intake-profile-')) : null;
  const profiled = (dir: string | null, args: string[]) => (dir ? ['--cpu-prof', `--cpu-prof-dir=${dir}`, ...args] : args);
  const gateway = await start(profiled(profileDir, ['bin/intake.js', 'gateway']), serviceEnv(), /gateway listening/);
  const base = `http://127.0.0.1:${gateway.port}`;
  const ratio = (rps: number) => (reference ? Math.round((rps / reference.reqPerSec) * 100) / 100 : '-');
  if (want('reference') || want('track') || want('memory')) {
    const withReference = want('reference') || want('track');
    const ref = withReference
      ? await start(['--import', 'tsx', 'bench/reference-server.ts'], { REDIS_URL, QUEUE_PREFIX: `${prefix}-ref`, PORT: '3199' }, /reference listening/)
      : null;
    const refUrl = `http://127.0.0.1:3199/api/track/${slug}`;
    const trackUrl = `${base}/api/track/${slug}`;
    if (ref) await load(refUrl, { requests: trackRequests('warm-ref'), duration: 3 });
    await load(trackUrl, { headers, requests: trackRequests('warm'), duration: 3 });
    const refRuns: Awaited<ReturnType<typeof load>>[] = [];
    const trackRuns: Awaited<ReturnType<typeof load>>[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (ref) refRuns.push(await load(refUrl, { requests: trackRequests(`ref${round}`) }));
      trackRuns.push(await load(trackUrl, { headers, requests: trackRequests(`track${round}`) }));
    }
    if (ref) {
      await stop(ref.child);
      await createEventsQueue({ ...config, queuePrefix: `${prefix}-ref` }, redis).obliterate({ force: true });
      reference = median(refRuns);
      report({
        scenario: 'reference: Koa + queue.add() per request',
        'req/s': reference.reqPerSec,
        'p50 ms': reference.p50,
        'p99 ms': reference.p99,
        errors: reference.errors,
        runs: refRuns.map((r) => r.reqPerSec).join(' / '),
      });
    }
    const r = median(trackRuns);
    trackMax = r.reqPerSec;
    if (want('track'))
      report({
        scenario: 'intake Track (all checks, group commit)',
        'req/s': r.reqPerSec,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        errors: r.errors,
        'x reference': ratio(r.reqPerSec),
        runs: trackRuns.map((x) => x.reqPerSec).join(' / '),
      });
  }
  if (want('identify') || want('profiles')) {
    let n = 0;
    const requests = [
      {
        method: 'POST',
        setupRequest: (req: { body?: string }) => {
          n++;
          const user = n % 10000;
          req.body = `{"userId":"user-${user}","traits":{"name":"User ${user}","plan":"p${n % 7}","visits":${n},"email":"user${user}@shop.io"}}`;
          return req;
        },
      },
    ];
    const r = await load(`${base}/api/identify/${slug}`, { headers, requests });
    if (want('identify'))
      report({
        scenario: 'intake Identify (10K users, merge + idempotency)',
        'req/s': r.reqPerSec,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        errors: r.errors,
        'x reference': ratio(r.reqPerSec),
      });
  }

  if (want('profiles')) {
    // Reads the users Identify got to (user-0 upwards, in order), less the last few in flight when it stopped.
    const identified = Number((await db.$queryRaw<{ n: bigint }[]>`SELECT count(*) AS n FROM profile_users WHERE environment_id = ${env.id}::uuid`)[0].n);
    const users = Math.max(1, identified - 100);
    let n = 0;
    const requests = [{ method: 'GET', setupRequest: (req: { path?: string }) => ((req.path = `/api/profiles/${slug}/user-${n++ % users}`), req) }];
    const r = await load(`${base}/api/profiles/${slug}/user-0`, { headers, requests, method: 'GET' });
    report({ scenario: `intake Profiles reads (${users} users)`, 'req/s': r.reqPerSec, 'p50 ms': r.p50, 'p99 ms': r.p99, errors: r.errors, 'x reference': ratio(r.reqPerSec) });
  }

  if (want('drain')) {
    // Pre-fill the queue with valid jobs, then time one worker process emptying it.
    await queue.obliterate({ force: true });
    const before = await countRows();
    const client = await queue.client;
    for (let i = 0; i < DRAIN_EVENTS; i += 1000) {
      const multi = client.multi();
      for (let j = i; j < Math.min(i + 1000, DRAIN_EVENTS); j++) {
        const messageId = `drain-${prefix}-${j}`;
        const payload = `{"type":"track","messageId":"${messageId}","event":"Order Completed","userId":"user-${j % 10000}","anonymousId":null,"timestamp":"2026-01-01T10:00:00.000Z","properties":${PROPERTIES},"context":{},"integrations":{}}`;
        const data: EventJob = { environmentId: env.id, messageId, receivedAt: Date.now(), timestampMs: Date.parse('2026-01-01T10:00:00Z'), payload };
        const jobId = jobIdFor(env.id, messageId);
        new Job(queue, 'track', data, { ...queue.jobsOpts, jobId }, jobId).addJob(multi as never).catch(() => {});
      }
      await multi.exec();
    }
    const started = performance.now();
    const workerProfileDir = PROFILE ? mkdtempSync(path.join(tmpdir(), 'intake-profile-worker-')) : null;
    const worker = await start(profiled(workerProfileDir, ['bin/intake.js', 'worker']), serviceEnv(), /worker started/);
    let stored = 0;
    while (stored < DRAIN_EVENTS) {
      await new Promise((r) => setTimeout(r, 200));
      stored = (await countRows()) - before;
      if (performance.now() - started > 300_000) break;
    }
    const seconds = (performance.now() - started) / 1000;
    await stop(worker.child);
    if (workerProfileDir) printProfile(workerProfileDir, 'worker (drain)');
    report({
      scenario: `worker drain (${DRAIN_EVENTS} queued events, 1 worker process)`,
      'events/s': Math.round(stored / seconds),
      stored,
      seconds: Math.round(seconds * 10) / 10,
    });
  }

  if (want('e2e')) {
    // Track with a worker running. Unthrottled first; while the queue grows, step the rate
    // down to what the worker persisted and try again, to find the rate it keeps up with.
    await queue.obliterate({ force: true });
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    let rate = Number(process.env.BENCH_E2E_RATE ?? 0);
    for (let attempt = 0; attempt < 4; attempt++) {
      const startRows = await countRows();
      const r = await load(`${base}/api/track/${slug}`, { headers, requests: trackRequests(`e2e${attempt}`), ...(rate ? { overallRate: rate } : {}) });
      const persistedRate = ((await countRows()) - startRows) / r.duration;
      const waiting = (await queue.getJobCounts('waiting')).waiting;
      report({
        scenario: `end to end: Track ${rate ? `at ${rate} req/s` : 'unthrottled'}, 1 gateway + 1 worker`,
        'accepted/s': r.reqPerSec,
        'persisted/s': Math.round(persistedRate),
        'queue depth': waiting,
        'p99 ms': r.p99,
      });
      if (waiting <= r.reqPerSec * 0.1) break;
      rate = Math.floor(persistedRate * 0.9);
      while ((await queue.getJobCounts('waiting')).waiting > 0) await new Promise((res) => setTimeout(res, 500));
    }
    await stop(worker.child);
  }

  if (want('memory')) {
    // RSS of the gateway across a long run at 80 % of its maximum Track rate, with a worker
    // draining the queue. The first 30 s (warm-up, JIT, pools) are not judged.
    const seconds = Number(process.env.BENCH_MEMORY_SECONDS ?? 300);
    const rate = Math.floor(trackMax * 0.8);
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    const samples: number[] = [];
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gateway.child.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
    const sampler = setInterval(() => samples.push(rss()), 10_000);
    const r = await load(`${base}/api/track/${slug}`, { headers, requests: trackRequests('memory'), overallRate: rate, duration: seconds });
    clearInterval(sampler);
    await stop(worker.child);
    const judged = samples.slice(3);
    const lo = Math.min(...judged);
    const hi = Math.max(...judged);
    report({
      scenario: `gateway RSS over ${seconds} s at ${rate} req/s (80 % of max)`,
      'req/s': r.reqPerSec,
      'p99 ms': r.p99,
      'RSS MB first/min/max/last': [judged[0], lo, hi, judged.at(-1)].map((v) => Math.round(v ?? 0)).join('/'),
      'RSS spread %': Math.round(((hi - lo) / lo) * 1000) / 10,
      'RSS drift first→last %': Math.round((((judged.at(-1) ?? 0) - judged[0]) / judged[0]) * 1000) / 10,
    });
  }

  await stop(gateway.child);
  if (profileDir) printProfile(profileDir, 'gateway');
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  await operator.close();

  console.log('\n' + table(rows));
}

/** The run with the median throughput (its latencies come with it). */
function median<T extends { reqPerSec: number }>(runs: T[]): T {
  return [...runs].sort((a, b) => a.reqPerSec - b.reqPerSec)[Math.floor(runs.length / 2)];
}

function table(list: Row[]): string {
  const columns = [...new Set(list.flatMap((r) => Object.keys(r)))];
  const lines = [`| ${columns.join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`];
  for (const r of list) lines.push(`| ${columns.map((c) => r[c] ?? '').join(' | ')} |`);
  return lines.join('\n');
}

runScript(main, children);
