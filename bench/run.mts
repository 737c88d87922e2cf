// npm run bench — measures intake on this machine against the local PostgreSQL and Redis.
// It starts what it measures (gateway, worker, the reference server) as separate processes,
// drives Track, Identify and Profiles load with wrk (a C load generator: it leaves the cores to
// the servers; Debian package `wrk`) and the memory run's fixed rate with autocannon, and
// prints one table plus a JSON line per scenario. Every figure that has a yardstick is given as
// a ratio to it, measured in the same run and in alternating rounds (medians of BENCH_ROUNDS,
// default 3), so the ratios survive a noisy machine:
// - Track against the naive "Koa + one queue.add() per request" server and against plain Koa that
//   parses the body and answers with no queue at all (bench/reference-server.ts);
// - one worker draining a queued backlog against PostgreSQL's own 500-row
//   `INSERT … ON CONFLICT DO NOTHING` into a copy of the events table (same indexes), one connection.
// Then the end to end scenario: a gateway and one worker at the gateway's maximum rate for
// BENCH_E2E_SECONDS (60): accepted/s, stored/s, and what is still queued at the end.
//
// BENCH_DURATION (seconds per load round, default 10), BENCH_CONNECTIONS (default 50),
// BENCH_PROFILE=1 (CPU profiles of the gateway and the drain's worker, summarized at the end),
// BENCH_DRAIN_EVENTS (default 100000), BENCH_ONLY (comma list of scenario names: reference,
// track, identify, identify-shared, profiles, drain, drain-gateway, drop, e2e, cluster, memory), BENCH_MEMORY_SECONDS (default 300),
// BENCH_FILL_SECONDS (20: drain-gateway's queue fill), BENCH_DROP_EVENTS (2000000), BENCH_DROP_SECONDS (30)
// and BENCH_CLUSTER_SECONDS (20).
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import pg from 'pg';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { openOperator } from '../operations/operator.ts';
import { loadConfig } from '../platform/config.ts';
import { createDb } from '../platform/db.ts';
import { identityHash } from '../platform/identity-hash.ts';
import { migrate } from '../cli/migrate.ts';
import { createPartitionsFor, dropEventPartition, eventPartitions, STORAGE_MAINTENANCE_LOCK } from '../events/storage.ts';
import { partitionName } from '../events/partition-plan.ts';
import { createEventsQueue, createServiceEventsQueue, eventBatchName, type QueuedEvent } from '../events/jobs.ts';
import { createRedis } from '../platform/redis.ts';
import { dropDatabase } from './databases.mts';
import { runScript, runWrk, startProcess, stopProcess } from './processes.mts';
import { summarizeProfile } from './cpu-profile.mts';
import { serverPids } from './cpu-usage.mts';
import { benchIdentifyAndProfiles } from './identify-bench.mts';
import { medianOf, medianRound, roundsText } from './medians.mts';

const DURATION = Number(process.env.BENCH_DURATION ?? 10);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 50);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
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

/** wrk must be installed; say how when it is not. */
function requireWrk() {
  try {
    execFileSync('wrk', ['--version'], { stdio: 'ignore' });
  } catch (err) {
    // `wrk --version` exits 1 after printing its banner; only a missing binary is a problem.
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return;
    console.error('bench: wrk is not installed. On Debian/Ubuntu: apt-get update && apt-get install -y wrk');
    process.exit(1);
  }
}

const WRK_THREADS = process.env.BENCH_WRK_THREADS ?? '1';

/**
 * A wrk load of `script` (bench/wrk/*.lua, which builds each request and prints WRK_RESULT):
 * 2xx per second and latency percentiles. `env` reaches the script (run id, key, ...).
 */
async function wrkLoad(url: string, script: string, env: Record<string, string>, opts: { duration?: number; connections?: number } = {}): Promise<Load> {
  const duration = opts.duration ?? DURATION;
  const args = ['-t', WRK_THREADS, '-c', String(opts.connections ?? CONNECTIONS), '-d', `${duration}s`, '--timeout', '10s', '-s', `bench/wrk/${script}`, url];
  const r = await runWrk(args, env, children);
  const seconds = r.duration_us / 1e6;
  const ok = r.requests - r.non2xx;
  return {
    reqPerSec: Math.round(ok / seconds),
    p50: Math.round(r.p50_us / 100) / 10,
    p99: Math.round(r.p99_us / 100) / 10,
    max: Math.round(r.max_us / 100) / 10,
    errors: r.non2xx + r.connect + r.read + r.write + r.timeout,
    ok,
    duration: seconds,
  };
}

/** Track load: ~400-byte bodies with unique messageIds (bench/wrk/track.lua). */
function wrkTrack(url: string, opts: { runId: string; apiKey?: string; duration?: number; connections?: number }) {
  return wrkLoad(url, 'track.lua', { BENCH_RUN_ID: opts.runId, BENCH_API_KEY: opts.apiKey ?? '', BENCH_PROPERTIES: PROPERTIES }, opts);
}

interface Load {
  reqPerSec: number;
  p50: number;
  p99: number;
  /** The slowest request, ms (wrk only). */
  max?: number;
  errors: number;
  ok: number;
  duration: number;
}

/** Loads run at the same time against several servers, as one: their answers added up over the longest, their worst latencies. */
function atOnce(loads: Load[]): Load {
  const ok = loads.reduce((n, l) => n + l.ok, 0);
  const duration = Math.max(...loads.map((l) => l.duration));
  return {
    reqPerSec: Math.round(ok / duration),
    p50: Math.max(...loads.map((l) => l.p50)),
    p99: Math.max(...loads.map((l) => l.p99)),
    errors: loads.reduce((n, l) => n + l.errors, 0),
    ok,
    duration,
  };
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

/**
 * Identify through two gateways at once over the same 10,000 users, as behind a load balancer
 * (a user's calls land on either), with the profile cache (the default) and without it
 * (IDENTIFY_CACHE_MB=0), in alternating rounds. Where the other gateway wrote, a gateway's cache
 * is stale: what the cache costs there is what identify/cache-gate.ts bounds.
 */
async function benchIdentifyShared(slug: string, apiKey: string) {
  const timestamp = new Date().toISOString();
  const setups: { name: string; env: Record<string, string> }[] = [
    { name: 'profile cache', env: {} },
    { name: 'IDENTIFY_CACHE_MB=0', env: { IDENTIFY_CACHE_MB: '0' } },
  ];
  const pairs = await Promise.all(
    setups.map(async (setup) => ({
      ...setup,
      gateways: await Promise.all([0, 1].map(() => start(['bin/intake.js', 'gateway'], serviceEnv(setup.env), /gateway listening/))),
      runs: [] as Load[],
    })),
  );
  const round = async (pair: (typeof pairs)[number], tag: string): Promise<Load> =>
    atOnce(
      await Promise.all(
        pair.gateways.map((g, j) =>
          wrkLoad(
            `http://127.0.0.1:${g.port}/api/identify/${slug}`,
            'identify.lua',
            { BENCH_RUN_ID: `${prefix}-shared-${tag}-${j}`, BENCH_API_KEY: apiKey, BENCH_TIMESTAMP: timestamp },
            { connections: Math.ceil(CONNECTIONS / 2) },
          ),
        ),
      ),
    );
  try {
    for (const [i, pair] of pairs.entries()) await round(pair, `warm${i}`);
    for (let r = 0; r < ROUNDS; r++) for (const [i, pair] of pairs.entries()) pair.runs.push(await round(pair, `${i}-${r}`));
  } finally {
    await Promise.all(pairs.flatMap((p) => p.gateways.map((g) => stop(g.child))));
  }
  const [cached, uncached] = pairs.map((p) => medianRound(p.runs));
  const row = (pair: (typeof pairs)[number], m: Load) => ({
    scenario: `Identify, 2 gateways at once over the same 10K users, ${pair.name}`,
    'req/s': m.reqPerSec,
    'p99 ms': m.p99,
    errors: m.errors,
    runs: roundsText(pair.runs),
  });
  report({ ...row(pairs[0], cached), 'x no cache': Math.round((cached.reqPerSec / uncached.reqPerSec) * 100) / 100 });
  report(row(pairs[1], uncached));
}

async function main() {
  requireWrk();
  console.error(`bench: ${DURATION}s per round, ${CONNECTIONS} connections, prefix ${prefix}`);
  // A new database each run: a run leaves millions of rows (drain, drop, end to end), and a
  // worker writing into indexes earlier runs grew is measured against a reference that writes
  // into an empty copy.
  await dropDatabase(DATABASE_URL);
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
  // The bench's own counts go through a connection of their own with no client-side bound: the
  // service's pool gives a statement 5 s (QUERY_TIMEOUT_MS), and counting the millions of rows the
  // drain, drop and end to end scenarios leave can take longer while a worker writes beside it.
  const counts = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  const count = async (sql: string, values: unknown[] = []) => Number((await counts.query<{ n: string }>(sql, values)).rows[0].n);
  const countRows = () => count('SELECT count(*) AS n FROM events WHERE environment_id = $1::uuid', [env.id]);

  // The reference and intake's Track are measured alternately, ROUNDS rounds each, and compared
  // by their medians: this VM's speed drifts by tens of percent within minutes.
  let reference: Load | undefined;
  let plainReference: Load | undefined;
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
    const startReference = (kind: 'naive' | 'plain', port: number) =>
      start(
        ['--import', 'tsx', 'bench/reference-server.ts'],
        { REDIS_URL, QUEUE_PREFIX: `${prefix}-ref`, PORT: String(port), REFERENCE: kind },
        /reference listening/,
      );
    const ref = withReference ? await startReference('naive', 3199) : null;
    const plain = withReference ? await startReference('plain', 3198) : null;
    const refUrl = `http://127.0.0.1:3199/api/track/${slug}`;
    const plainUrl = `http://127.0.0.1:3198/api/track/${slug}`;
    const trackUrl = `${base}/api/track/${slug}`;
    if (ref) await wrkTrack(refUrl, { runId: `${prefix}-warm-ref`, duration: 3 });
    if (plain) await wrkTrack(plainUrl, { runId: `${prefix}-warm-plain`, duration: 3 });
    await wrkTrack(trackUrl, { runId: `${prefix}-warm`, apiKey: key, duration: 3 });
    const refRuns: Load[] = [];
    const plainRuns: Load[] = [];
    const trackRuns: Load[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (ref) refRuns.push(await wrkTrack(refUrl, { runId: `${prefix}-ref${round}` }));
      if (plain) plainRuns.push(await wrkTrack(plainUrl, { runId: `${prefix}-plain${round}` }));
      trackRuns.push(await wrkTrack(trackUrl, { runId: `${prefix}-track${round}`, apiKey: key }));
    }
    if (ref && plain) {
      await stop(ref.child);
      await stop(plain.child);
      await createEventsQueue({ ...config, queuePrefix: `${prefix}-ref` }, redis).obliterate({ force: true });
      reference = medianRound(refRuns);
      plainReference = medianRound(plainRuns);
      for (const [scenario, runs, median] of [
        ['reference: Koa + queue.add() per request', refRuns, reference],
        ['reference: plain Koa, no queue', plainRuns, plainReference],
      ] as const)
        report({ scenario, 'req/s': median.reqPerSec, 'p50 ms': median.p50, 'p99 ms': median.p99, errors: median.errors, runs: roundsText(runs) });
    }
    const r = medianRound(trackRuns);
    trackMax = r.reqPerSec;
    if (want('track'))
      report({
        scenario: 'intake Track (all checks, one queue job per group commit)',
        'req/s': r.reqPerSec,
        'p50 ms': r.p50,
        'p99 ms': r.p99,
        errors: r.errors,
        'x reference': ratio(r.reqPerSec),
        'p99 x reference': reference ? Math.round((r.p99 / reference.p99) * 100) / 100 : '-',
        'x plain Koa': plainReference ? Math.round((r.reqPerSec / plainReference.reqPerSec) * 100) / 100 : '-',
        'p99 x plain Koa': plainReference ? Math.round((r.p99 / plainReference.p99) * 100) / 100 : '-',
        runs: roundsText(trackRuns),
      });
  }
  if (want('identify') || want('profiles')) {
    await benchIdentifyAndProfiles({
      base,
      gatewayPid: gateway.child.pid!,
      slug,
      apiKey: key,
      databaseUrl: DATABASE_URL,
      rounds: ROUNDS,
      want,
      wrk: wrkLoad,
      start,
      stop,
      report,
      identifiedUsers: () => count('SELECT count(*) AS n FROM profile_users WHERE environment_id = $1::uuid', [env.id]),
    });
  }

  if (want('identify-shared')) await benchIdentifyShared(slug, key);

  // Identify's calls leave outbox rows (profile_fields_changed) that a worker relays as service events.
  // Relayed and stored here, before the worker scenarios, so that they measure Track's events
  // alone rather than a worker also working off this backlog.
  if ((want('drain') || want('drain-gateway') || want('e2e')) && (want('identify') || want('profiles'))) await relayOutboxBacklog();

  if (want('drain')) {
    // One worker process emptying a queued backlog (batch jobs as the gateway writes them),
    // alternated with PostgreSQL's own 500-row INSERT of the same rows into a copy of the events
    // table (same indexes, one connection): the yardstick for what one worker could reach.
    await createUnpartitionedCopy();
    const drains: { rate: number }[] = [];
    const inserts: { rate: number }[] = [];
    const workerProfileDir = PROFILE ? mkdtempSync(path.join(tmpdir(), 'intake-profile-worker-')) : null;
    for (let round = 0; round < ROUNDS; round++) {
      const events = drainEvents(env.id, `${prefix}-d${round}`, DRAIN_EVENTS);
      drains.push(await drainRound(events, round === 0 ? workerProfileDir : null));
      inserts.push(await pgInsertRound(events));
    }
    await db.$executeRawUnsafe('DROP TABLE IF EXISTS bench_events_copy');
    if (workerProfileDir) printProfile(workerProfileDir, 'worker (drain, first round)');
    const pgRate = medianOf(inserts.map((r) => r.rate));
    report({
      scenario: "PostgreSQL's own 500-row INSERT … ON CONFLICT DO NOTHING, unpartitioned copy of events, 1 connection",
      'events/s': pgRate,
      runs: inserts.map((r) => r.rate).join(' / '),
    });
    const drainRate = medianOf(drains.map((r) => r.rate));
    report({
      scenario: `worker drain (${DRAIN_EVENTS} queued events in batch jobs of 256, 1 worker process)`,
      'events/s': drainRate,
      'x PG insert': Math.round((drainRate / pgRate) * 100) / 100,
      runs: drains.map((r) => r.rate).join(' / '),
    });
  }

  if (want('drain-gateway')) {
    // The drain with the gateway's own batch sizes: the gateway alone queues what 50 wrk
    // connections send for BENCH_FILL_SECONDS (jobs of one event-loop turn each), then one worker
    // empties the queue; alternated with the 500-row INSERT into the unpartitioned copy.
    const fillSeconds = Number(process.env.BENCH_FILL_SECONDS ?? 20);
    await createUnpartitionedCopy();
    const drains: { rate: number; events: number; jobs: number }[] = [];
    const inserts: { rate: number }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      await queue.obliterate({ force: true });
      const fill = await wrkTrack(`${base}/api/track/${slug}`, { runId: `${prefix}-g${round}`, apiKey: key, duration: fillSeconds });
      const jobs = (await queue.getJobCounts('waiting')).waiting;
      const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
      const started = performance.now();
      // Done when the queue is empty: polling Redis costs the drain nothing, a count(*) would.
      while (performance.now() - started < 600_000) {
        const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
        if (Object.values(c).every((n) => n === 0)) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const seconds = (performance.now() - started) / 1000;
      await stop(worker.child);
      drains.push({ rate: Math.round(fill.ok / seconds), events: fill.ok, jobs });
      inserts.push(await pgInsertRound(drainEvents(env.id, `${prefix}-gi${round}`, DRAIN_EVENTS)));
    }
    await db.$executeRawUnsafe('DROP TABLE IF EXISTS bench_events_copy');
    const pgRate = medianOf(inserts.map((r) => r.rate));
    const drainRate = medianOf(drains.map((r) => r.rate));
    report({
      scenario: `worker drain of the gateway's own jobs (${CONNECTIONS} connections for ${fillSeconds} s, 1 worker process)`,
      'events/s': drainRate,
      'x PG insert': Math.round((drainRate / pgRate) * 100) / 100,
      'PG insert rows/s': pgRate,
      'events/job': Math.round(medianOf(drains.map((r) => r.events / Math.max(1, r.jobs)))),
      runs: drains.map((r) => `${r.rate} (${r.events} events)`).join(' / '),
      'PG runs': inserts.map((r) => r.rate).join(' / '),
    });
  }

  if (want('drop')) {
    // Retention dropping a day's partition of BENCH_DROP_EVENTS (2 M) events while Track runs at
    // the gateway's full rate with a worker storing it: the slowest Track request, errors, and
    // how long the drop held each lock.
    const dropEvents = Number(process.env.BENCH_DROP_EVENTS ?? 2_000_000);
    const day = Date.UTC(2001, 0, 1);
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    await createPartitionsFor(pool, day, day);
    const filled = performance.now();
    await pool.query(
      `WITH rows AS (
         SELECT $1::uuid AS e, $2 || g AS m, sha256(convert_to($2 || g, 'UTF8')) AS h, to_timestamp($3::float8 / 1000 + g * 0.04) AS r, g
         FROM generate_series(1, $4::int) g),
       ids AS (INSERT INTO event_ids (environment_id, message_hash, received_at) SELECT e, h, r FROM rows)
       INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
       SELECT e, m, h, 'Order Completed', 'user-' || (g % 10000), r, r, $5, 'processed', true, true FROM rows`,
      [env.id, `${prefix}-old-`, day, dropEvents, drainEvents(env.id, 'x', 1)[0].payload],
    );
    console.error(`drop: ${dropEvents} events in ${partitionName(day)} in ${((performance.now() - filled) / 1000).toFixed(0)} s`);
    await queue.obliterate({ force: true });
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    const seconds = Number(process.env.BENCH_DROP_SECONDS ?? 30);
    // The same load without a drop first: the yardstick of what this machine does meanwhile.
    const baseline = await wrkTrack(`${base}/api/track/${slug}`, { runId: `${prefix}-nodrop`, apiKey: key, duration: seconds });
    const track = wrkTrack(`${base}/api/track/${slug}`, { runId: `${prefix}-drop`, apiKey: key, duration: seconds });
    await new Promise((r) => setTimeout(r, 5000));
    const client = await pool.connect();
    // As the storage maintenance drops it: holding its lock, so the worker's own round keeps off.
    await client.query('SELECT pg_advisory_lock($1)', [STORAGE_MAINTENANCE_LOCK]);
    const [partition] = (await eventPartitions(client)).filter((p) => p.day === day);
    const timing = await dropEventPartition(client, partition);
    await client.query('SELECT pg_advisory_unlock($1)', [STORAGE_MAINTENANCE_LOCK]);
    client.release();
    const r = await track;
    await stop(worker.child);
    await pool.end();
    report({
      scenario: `retention drops a day's partition of ${dropEvents} events during ${seconds} s of Track at full rate (1 gateway + 1 worker)`,
      'req/s': r.reqPerSec,
      'p99 ms': r.p99,
      'max ms': r.max ?? '-',
      errors: r.errors,
      'without the drop: req/s, p99, max ms': `${baseline.reqPerSec}, ${baseline.p99}, ${baseline.max ?? '-'}`,
      'DETACH CONCURRENTLY ms': Math.round(timing.detachMs),
      'DROP TABLE ms (exclusive on the detached table)': Math.round(timing.dropMs),
      'identities removed': timing.identitiesRemoved,
    });
  }

  /** The events table as it was before partitioning (one table, the unique key on it): the yardstick of the drains. */
  async function createUnpartitionedCopy() {
    await db.$executeRawUnsafe('DROP TABLE IF EXISTS bench_events_copy');
    await db.$executeRawUnsafe('CREATE TABLE bench_events_copy (LIKE events INCLUDING DEFAULTS, PRIMARY KEY (id))');
    await db.$executeRawUnsafe('CREATE UNIQUE INDEX ON bench_events_copy (environment_id, message_hash)');
    await db.$executeRawUnsafe('CREATE INDEX ON bench_events_copy (environment_id, received_at)');
  }

  async function relayOutboxBacklog() {
    const unrelayed = () => count('SELECT count(*) AS n FROM outbox_events WHERE relayed_at IS NULL');
    const serviceEvents = createServiceEventsQueue(config, redis);
    const pending = async (q: { getJobCounts(...types: string[]): Promise<Record<string, number>> }) =>
      Object.values(await q.getJobCounts('waiting', 'active', 'delayed')).reduce((a, b) => a + b, 0);
    const queued = async () => (await pending(queue)) + (await pending(serviceEvents));
    const backlog = await unrelayed();
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    const started = performance.now();
    while (((await unrelayed()) > 0 || (await queued()) > 0) && performance.now() - started < 600_000) await new Promise((r) => setTimeout(r, 500));
    await stop(worker.child);
    await serviceEvents.close();
    console.error(`relayed Identify's outbox backlog (${backlog} rows) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  }

  /** The rows of a drain round, as gateway/handlers/track.ts queues them. */
  function drainEvents(environmentId: string, runId: string, count: number): QueuedEvent[] {
    return Array.from({ length: count }, (_, j) => {
      const messageId = `${runId}-${j}`;
      const payload = `{"type":"track","messageId":"${messageId}","event":"Order Completed","userId":"user-${j % 10000}","anonymousId":null,"timestamp":"2026-01-01T10:00:00.000Z","properties":${PROPERTIES},"context":{},"integrations":{}}`;
      return { environmentId, messageId, receivedAt: Date.now(), timestampMs: Date.parse('2026-01-01T10:00:00Z'), payload };
    });
  }

  async function drainRound(events: QueuedEvent[], profileDir: string | null) {
    await queue.obliterate({ force: true });
    const jobs = [];
    for (let i = 0; i < events.length; i += 256)
      jobs.push({ name: eventBatchName(Math.min(256, events.length - i)), data: { events: events.slice(i, i + 256) } });
    for (let i = 0; i < jobs.length; i += 50) await queue.addBulk(jobs.slice(i, i + 50));
    const before = await countRows();
    const worker = await start(profiled(profileDir, ['bin/intake.js', 'worker']), serviceEnv(), /worker started/);
    // Timed from the moment the worker is up (its start-up is not the drain), over what it stores from then on.
    const started = performance.now();
    const atStart = await countRows();
    let stored = atStart - before;
    while (stored < events.length && performance.now() - started < 300_000) {
      await new Promise((r) => setTimeout(r, 100));
      stored = (await countRows()) - before;
    }
    const seconds = (performance.now() - started) / 1000;
    await stop(worker.child);
    return { rate: Math.round((before + stored - atStart) / seconds) };
  }

  async function pgInsertRound(events: QueuedEvent[]) {
    const client = new pg.Client({ connectionString: DATABASE_URL });
    await client.connect();
    try {
      await client.query('TRUNCATE bench_events_copy');
      const columns =
        'environment_id, message_id, message_hash, event, user_id, anonymous_id, "timestamp", received_at, payload, status, within_limits, limit_reason, drives_journeys, error';
      const rowSql = (k: number) =>
        `($${k * 9 + 1}::uuid, $${k * 9 + 2}, $${k * 9 + 3}::bytea, $${k * 9 + 4}, $${k * 9 + 5}, NULL, to_timestamp($${k * 9 + 6}::float8 / 1000), to_timestamp($${k * 9 + 7}::float8 / 1000), $${k * 9 + 8}, 'processed', true, NULL, $${k * 9 + 9}::bool, NULL)`;
      const sql500 = `INSERT INTO bench_events_copy (${columns}) VALUES ${Array.from({ length: 500 }, (_, k) => rowSql(k)).join(', ')} ON CONFLICT DO NOTHING`;
      const started = performance.now();
      for (let i = 0; i < events.length; i += 500) {
        const chunk = events.slice(i, i + 500);
        const sql =
          chunk.length === 500
            ? sql500
            : `INSERT INTO bench_events_copy (${columns}) VALUES ${chunk.map((_, k) => rowSql(k)).join(', ')} ON CONFLICT DO NOTHING`;
        const values = chunk.flatMap((e, j) => [
          e.environmentId,
          e.messageId,
          identityHash(e.messageId),
          'Order Completed',
          `user-${(i + j) % 10000}`,
          e.timestampMs,
          e.receivedAt,
          e.payload,
          true,
        ]);
        await client.query(sql, values);
      }
      return { rate: Math.round(events.length / ((performance.now() - started) / 1000)) };
    } finally {
      await client.end();
    }
  }

  if (want('e2e')) {
    // A gateway and one worker at the gateway's maximum rate (unthrottled wrk) for
    // BENCH_E2E_SECONDS: what was accepted, what was stored meanwhile, and what is still queued
    // at the end (every accepted event has its own messageId, so queued = accepted - stored).
    await queue.obliterate({ force: true });
    const seconds = Number(process.env.BENCH_E2E_SECONDS ?? 60);
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    const startRows = await countRows();
    const r = await wrkTrack(`${base}/api/track/${slug}`, { runId: `${prefix}-e2e`, apiKey: key, duration: seconds });
    const stored = (await countRows()) - startRows;
    const queued = Math.max(0, r.ok - stored);
    const jobs = await queue.getJobCounts('waiting', 'active');
    report({
      scenario: `end to end: Track at the gateway's max rate for ${seconds} s, 1 gateway + 1 worker`,
      'accepted/s': r.reqPerSec,
      'stored/s': Math.round(stored / r.duration),
      'queued at end (events)': queued,
      'queued at end (s of accepted rate)': Math.round((queued / Math.max(1, r.reqPerSec)) * 100) / 100,
      'batch jobs waiting/active': `${jobs.waiting}/${jobs.active}`,
      'p99 ms': r.p99,
      errors: r.errors,
    });
    await stop(worker.child);
  }

  if (want('memory')) {
    // RSS of the gateway across a long run at 80 % of its maximum Track rate, with a worker
    // draining the queue. The first 30 s (warm-up, JIT, pools) are not judged.
    const seconds = Number(process.env.BENCH_MEMORY_SECONDS ?? 300);
    const rate = Math.floor(trackMax * 0.8);
    const worker = await start(['bin/intake.js', 'worker'], serviceEnv(), /worker started/);
    const samples: number[] = [];
    // The gateway's primary and its processes (GATEWAY_PROCESSES) together.
    const rssOf = (pid: number) => {
      try {
        return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
      } catch {
        return 0; // exited meanwhile
      }
    };
    const rss = () => serverPids(gateway.child.pid!).reduce((sum, pid) => sum + rssOf(pid), 0);
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

  if (want('cluster')) {
    // Two gateways and two workers (processes) at their maximum Track rate for
    // BENCH_CLUSTER_SECONDS, on a Redis of their own, then on a three-master Redis Cluster with a
    // replica each (QUEUE_PARTITIONS=3), then the same with REDIS_MIN_REPLICA_ACKS=1, all started
    // here from this machine's redis-server. Beside accepted/s and stored/s: the CPU every Redis
    // server (replicas too) spent per accepted event (INFO cpu), from which events/s per Redis
    // core follows. On one machine the cluster cannot be faster: the figures are its cost.
    const seconds = Number(process.env.BENCH_CLUSTER_SECONDS ?? 20);
    const { startOwnRedis } = await import('../test/helpers/redis-server.ts');
    const { startRedisCluster } = await import('../test/helpers/redis-cluster.ts');
    const own = await startOwnRedis();
    const cluster = await startRedisCluster(3);
    const redisCpu = async (admins: { info(section: string): Promise<string> }[]) => {
      let total = 0;
      for (const admin of admins) {
        const text = await admin.info('cpu');
        for (const field of ['used_cpu_sys', 'used_cpu_user']) total += Number(new RegExp(`^${field}:([\\d.]+)`, 'm').exec(text)?.[1] ?? 0);
      }
      return total;
    };
    const setups: { name: string; env: Record<string, string>; admins: { info(section: string): Promise<string> }[] }[] = [
      { name: 'one Redis', env: { REDIS_URL: own.url }, admins: [own.admin] },
      {
        name: 'Redis Cluster (3 masters + 3 replicas), 3 partitions',
        env: { REDIS_CLUSTER_NODES: cluster.nodes, QUEUE_PARTITIONS: '3' },
        admins: cluster.all.map((n) => n.admin),
      },
      {
        name: 'Redis Cluster, 3 partitions, REDIS_MIN_REPLICA_ACKS=1',
        env: { REDIS_CLUSTER_NODES: cluster.nodes, QUEUE_PARTITIONS: '3', REDIS_MIN_REPLICA_ACKS: '1' },
        admins: cluster.all.map((n) => n.admin),
      },
    ];
    try {
      for (const [i, setup] of setups.entries()) {
        const env = serviceEnv({ ...setup.env, QUEUE_PREFIX: `${prefix}-cluster${i}` });
        const gateways = await Promise.all([0, 1].map(() => start(['bin/intake.js', 'gateway'], env, /gateway listening/)));
        const workers = await Promise.all([0, 1].map(() => start(['bin/intake.js', 'worker'], env, /worker started/)));
        const startRows = await countRows();
        const cpuBefore = await redisCpu(setup.admins);
        const run = atOnce(
          await Promise.all(
            gateways.map((g, j) =>
              wrkTrack(`http://127.0.0.1:${g.port}/api/track/${slug}`, {
                runId: `${prefix}-cluster${i}-${j}`,
                apiKey: key,
                duration: seconds,
                connections: Math.ceil(CONNECTIONS / 2),
              }),
            ),
          ),
        );
        const cpu = (await redisCpu(setup.admins)) - cpuBefore;
        const stored = (await countRows()) - startRows;
        report({
          scenario: `Track, 2 gateways + 2 workers, ${setup.name}, ${seconds} s`,
          'accepted/s': run.reqPerSec,
          'stored/s': Math.round(stored / run.duration),
          'p99 ms': run.p99,
          'Redis CPU µs/event (all servers)': Math.round((cpu / Math.max(1, run.ok)) * 1e7) / 10,
          errors: run.errors,
        });
        await Promise.all([...gateways, ...workers].map((p) => stop(p.child)));
      }
    } finally {
      await cluster.close();
      await own.close();
    }
  }

  await stop(gateway.child);
  if (profileDir) printProfile(profileDir, 'gateway');
  await queue.obliterate({ force: true }).catch(() => {});
  await queue.close();
  redis.disconnect();
  await operator.close();
  await counts.end();

  console.log('\n' + table(rows));
}

function table(list: Row[]): string {
  const columns = [...new Set(list.flatMap((r) => Object.keys(r)))];
  const lines = [`| ${columns.join(' | ')} |`, `|${columns.map(() => '---').join('|')}|`];
  for (const r of list) lines.push(`| ${columns.map((c) => r[c] ?? '').join(' | ')} |`);
  return lines.join('\n');
}

runScript(main, children);
