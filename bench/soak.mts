// npm run soak — a long steady Track load against a gateway and worker processes, with the
// outcome of every request kept: at the end (queue drained) each messageId answered 202 must be
// stored exactly once. Prints an RSS sample line every 10 s, then one JSON summary line; exits
// non-zero if an accepted event was lost or stored twice, or the queue did not drain.
//
// SOAK_SCENARIO=identify-users runs the memory scenario instead (bench/soak-identify-users.mts:
// over a million new users through Identify, the gateway's RSS against its stated bound).
//
// SOAK_SECONDS (default 600), SOAK_RATE (req/s; default half the rate of a 5 s unthrottled
// probe), SOAK_CONNECTIONS (default 50), SOAK_WORKERS (worker processes, default 1),
// SOAK_DRAIN_SECONDS (how long to wait for the queue to empty, default 600), SOAK_KEEP=1 keeps
// the run's events (otherwise deleted at the end), SOAK_DATABASE_URL (default the bench's
// database `intake_bench`), REDIS_URL.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { loadQueueModules, openOperator } from '../operations/operator.ts';
import { loadConfig } from '../platform/config.ts';
import { createDb } from '../platform/db.ts';
import { migrate } from '../cli/migrate.ts';
import { runScript, startProcess, stopProcess } from './processes.mts';
import { soakIdentifyUsers } from './soak-identify-users.mts';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const GIVEN_RATE = process.env.SOAK_RATE ? Number(process.env.SOAK_RATE) : undefined;
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 1);
const DRAIN_SECONDS = Number(process.env.SOAK_DRAIN_SECONDS ?? 600);
const KEEP = process.env.SOAK_KEEP === '1';
const DATABASE_URL = process.env.SOAK_DATABASE_URL ?? process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const SAMPLE_MS = 10_000;
const prefix = `soak-${randomBytes(4).toString('hex')}`;

const children: ChildProcess[] = [];

const start = (args: string[], ready: RegExp, env: Record<string, string> = {}) =>
  startProcess(args, { DATABASE_URL, REDIS_URL, QUEUE_PREFIX: prefix, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...env }, ready, children);
const stop = stopProcess;

const rssMb = (pid: number | undefined) => {
  try {
    return Math.round(Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024);
  } catch {
    return 0;
  }
};

const PROPERTIES = JSON.stringify({ plan: 'pro', price: 49.5, currency: 'EUR', items: [{ sku: 'A-100', qty: 2 }], campaign: 'winter-sale' });

/** Track load with a new messageId per request; every 202's messageId (from its answer) goes into `accepted`. */
function trackLoad(url: string, key: string, run: string, opts: { seconds: number; rate?: number }, accepted: Set<string>) {
  let n = 0;
  const sent = new Set<string>();
  const statuses: Record<string, number> = {};
  const done = autocannon({
    url,
    connections: CONNECTIONS,
    duration: opts.seconds,
    overallRate: opts.rate,
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    requests: [
      {
        setupRequest: (req: { body?: string }) => {
          const messageId = `${run}-${++n}`;
          sent.add(messageId);
          req.body = `{"type":"track","messageId":"${messageId}","event":"Soak","userId":"user-${n % 10000}","timestamp":"2026-01-01T10:00:00.000Z","properties":${PROPERTIES}}`;
          return req;
        },
        onResponse: (status: number, body: string) => {
          statuses[status] = (statuses[status] ?? 0) + 1;
          if (status !== 202) return;
          const id = (JSON.parse(body) as { message_id: string }).message_id;
          // A 202 naming an id never sent would be a gateway bug; count it as such rather than trust it.
          if (sent.has(id)) accepted.add(id);
          else statuses['202-unknown-id'] = (statuses['202-unknown-id'] ?? 0) + 1;
        },
      },
    ] as never,
  });
  return { done, sent, statuses };
}

async function main() {
  if (process.env.SOAK_SCENARIO === 'identify-users') {
    return soakIdentifyUsers({ prefix, redisUrl: REDIS_URL, keep: KEEP, children, start: (args, env, ready) => start(args, ready, env) });
  }
  await migrate(DATABASE_URL);
  const config = loadConfig({ ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: prefix });
  const db = createDb(config);
  const operator = openOperator(config, db, await loadQueueModules());
  const slug = `soak-${randomBytes(3).toString('hex')}`;
  await orgCreate(operator, [slug]);
  const { key } = await keyCreate(operator, [slug]);
  const environmentId = (await db.environment.findUniqueOrThrow({ where: { pathValue: slug } })).id;
  const queue = operator.eventsQueue();

  const gateway = await start(['bin/intake.js', 'gateway'], /gateway listening/);
  const workers = await Promise.all(Array.from({ length: WORKERS }, () => start(['bin/intake.js', 'worker'], /worker started/)));
  const url = `http://127.0.0.1:${gateway.port}/api/track/${slug}`;
  const accepted = new Set<string>();

  let rate = GIVEN_RATE;
  let probeRate: number | undefined;
  if (!rate) {
    // Its events are checked like the soak's: they are accepted events too.
    const probe = trackLoad(url, key, `${prefix}-probe`, { seconds: 5 }, accepted);
    const r = await probe.done;
    probeRate = Math.round(r['2xx'] / r.duration);
    rate = Math.max(1, Math.floor(probeRate / 2));
  }
  console.error(
    `soak: ${SECONDS} s at ${rate} req/s${probeRate ? ` (probe max ${probeRate} req/s)` : ''}, ${CONNECTIONS} connections, ${WORKERS} worker(s), prefix ${prefix}`,
  );

  const probeAccepted = accepted.size;
  const samples: { t: number; gatewayRssMb: number; workerRssMb: number[] }[] = [];
  const started = Date.now();
  const sample = async (phase: string) => {
    const s = { t: Math.round((Date.now() - started) / 1000), gatewayRssMb: rssMb(gateway.child.pid), workerRssMb: workers.map((w) => rssMb(w.child.pid)) };
    samples.push(s);
    const waiting = await queue.getJobCounts('wait', 'active', 'delayed').catch(() => undefined);
    console.log(JSON.stringify({ soak: 'sample', phase, ...s, accepted: accepted.size - probeAccepted, queue: waiting }));
  };
  await sample('load');
  let phase = 'load';
  const sampler = setInterval(() => void sample(phase), SAMPLE_MS);

  const soak = trackLoad(url, key, `${prefix}-soak`, { seconds: SECONDS, rate }, accepted);
  const result = await soak.done;
  const acceptedBySoak = [...soak.sent].filter((id) => accepted.has(id)).length;

  // Drained: no job left waiting, running or waiting for a retry.
  phase = 'drain';
  const drainStarted = Date.now();
  let drained = false;
  while (Date.now() - drainStarted < DRAIN_SECONDS * 1000) {
    const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused');
    if (Object.values(c).every((n) => n === 0)) {
      drained = true;
      break;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  const drainSeconds = Math.round((Date.now() - drainStarted) / 100) / 10;
  clearInterval(sampler);
  await sample('drained');

  // Rows per accepted messageId, in batches the query's parameter limit allows.
  const ids = [...accepted];
  let persisted = 0;
  let storedTwice = 0;
  for (let i = 0; i < ids.length; i += 5000) {
    const groups = await db.event.groupBy({
      by: ['messageId'],
      where: { environmentId, messageId: { in: ids.slice(i, i + 5000) } },
      _count: { _all: true },
    });
    persisted += groups.length;
    storedTwice += groups.filter((g) => g._count._all > 1).length;
  }
  // The unique index forbids it, but count every messageId of the run with more than one row anyway.
  const duplicates = await db.event.groupBy({
    by: ['messageId'],
    where: { environmentId },
    _count: { _all: true },
    having: { messageId: { _count: { gt: 1 } } },
  });
  const rows = await db.event.count({ where: { environmentId } });
  const failedRows = await db.event.count({ where: { environmentId, status: 'failed' } });
  const extraRows = duplicates.reduce((sum, d) => sum + d._count._all - 1, 0);
  const lost = ids.length - persisted;
  const duplicated = Math.max(duplicates.length, storedTwice);

  const range = (values: number[]) => ({ first: values[0], min: Math.min(...values), max: Math.max(...values), last: values.at(-1) });
  const summary = {
    soak: 'summary',
    seconds: SECONDS,
    rate,
    probeRate,
    connections: CONNECTIONS,
    workers: WORKERS,
    sent: soak.sent.size,
    accepted: acceptedBySoak,
    acceptedPerSecond: Math.round(acceptedBySoak / result.duration),
    acceptedWithProbe: ids.length,
    persisted,
    lost,
    duplicated,
    // Requests without an answer (cut at the end of the run, timeouts) may still have been stored.
    storedWithout202: rows - extraRows - persisted,
    failedRows,
    statuses: soak.statuses,
    errors: result.errors,
    timeouts: result.timeouts,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    maxMs: result.latency.max,
    drained,
    drainSeconds,
    gatewayRssMb: range(samples.map((s) => s.gatewayRssMb)),
    workerRssMb: workers.map((_, i) => range(samples.map((s) => s.workerRssMb[i]))),
  };
  console.log(JSON.stringify(summary));

  await Promise.all(children.map(stop));
  await queue.obliterate({ force: true }).catch(() => {});
  if (!KEEP) await db.event.deleteMany({ where: { environmentId } });
  await operator.close();
  if (lost > 0 || duplicated > 0 || !drained) {
    console.error(`soak FAILED: lost ${lost}, duplicated ${duplicated}, drained ${drained}`);
    process.exitCode = 1;
  }
}

runScript(main, children);
