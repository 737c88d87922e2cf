// The soak's memory scenario (SOAK_SCENARIO=identify-users): Identify calls of users never seen
// before (bench/wrk/identify-users.lua), until SOAK_USERS of them (default 1,400,000) were
// answered 200, against one gateway process, sampling its RSS every second. Each new profile
// enters the gateway's profile cache, so the cache fills and then evicts for the rest of the
// run: the RSS must stay under the stated bound (docs/reliability.md) at every sample:
//   SOAK_RSS_BASE_MB (default 300) + 2 × (IDENTIFY_CACHE_MB + KEY_CACHE_MB).
// A collection's peak lasts seconds, so a sparser sample can miss it.
// The gateway runs a build of the sources made for the run, as deployed: the sources through
// tsx would add its compiler (~60 MB: its cache in the process, a service process for each
// thread) to what is measured.
// Prints a sample line every second and one JSON summary line; exits non-zero when any sample
// passed the bound or a call was not answered 200. It runs in a database of its own
// (SOAK_USERS_DATABASE_URL, default `intake_soak_users`), dropped at the end unless SOAK_KEEP=1.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { openOperator } from '../operations/operator.ts';
import { loadConfig } from '../platform/config.ts';
import { createDb } from '../platform/db.ts';
import { migrate } from '../cli/migrate.ts';
import { serverPids } from './cpu-usage.mts';
import { dropDatabase } from './databases.mts';
import { runWrk } from './processes.mts';

export interface SoakDeps {
  prefix: string;
  redisUrl: string;
  keep: boolean;
  children: ChildProcess[];
  start: (args: string[], env: Record<string, string>, ready: RegExp) => Promise<{ child: ChildProcess; port: number }>;
}

const USERS = Number(process.env.SOAK_USERS ?? 1_400_000);
const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 50);
const BASE_MB = Number(process.env.SOAK_RSS_BASE_MB ?? 300);
const DATABASE_URL = process.env.SOAK_USERS_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_soak_users';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
/** The run's build: under node_modules, so that its imports resolve to the checkout's dependencies. */
const BUILD_DIR = path.join(ROOT, 'node_modules', '.cache', 'intake-soak-users-dist');
/** wrk runs in rounds of this long until enough users were identified. */
const ROUND_SECONDS = 30;
const SAMPLE_MS = 1_000;

const rssMbOf = (pid: number) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  } catch {
    return 0;
  }
};
/** The gateway's RSS: its process, and the processes it forked when GATEWAY_PROCESSES > 1. */
const gatewayRssMb = (pid: number) => Math.round(serverPids(pid).reduce((sum, p) => sum + rssMbOf(p), 0));

/** One wrk round: how many calls were answered 200, and how many were not. */
async function wrkRound(url: string, key: string, runId: string, children: ChildProcess[]): Promise<{ ok: number; failed: number; seconds: number }> {
  const args = ['-t', '1', '-c', String(CONNECTIONS), '-d', `${ROUND_SECONDS}s`, '--timeout', '10s', '-s', 'bench/wrk/identify-users.lua', url];
  const r = await runWrk(args, { BENCH_RUN_ID: runId, BENCH_API_KEY: key }, children);
  const failed = r.non2xx + r.connect + r.read + r.write + r.timeout;
  return { ok: r.requests - r.non2xx, failed, seconds: r.duration_us / 1e6 };
}

export async function soakIdentifyUsers(d: SoakDeps): Promise<void> {
  await migrate(DATABASE_URL);
  const config = loadConfig({ ...process.env, DATABASE_URL, REDIS_URL: d.redisUrl, QUEUE_PREFIX: d.prefix });
  const db = createDb(config);
  const operator = openOperator(config, db);
  const slug = `soak-${d.prefix.slice(5)}`;
  await orgCreate(operator, [slug]);
  const { key } = await keyCreate(operator, [slug]);
  await operator.close();

  execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--out-dir', BUILD_DIR, '--no-check'], { stdio: ['ignore', 'ignore', 'inherit'] });
  const gateway = await d.start(['bin/intake.js', 'gateway'], { DATABASE_URL, INTAKE_RUN: 'dist', INTAKE_DIST: BUILD_DIR }, /gateway listening/);
  const pid = gateway.child.pid!;
  const url = `http://127.0.0.1:${gateway.port}/api/identify/${slug}`;
  const cachesMb = config.identifyCacheMb + config.keyCacheMb;
  const boundMb = BASE_MB + 2 * cachesMb;
  console.error(
    `soak identify-users: ${USERS} users, ${CONNECTIONS} connections, IDENTIFY_CACHE_MB ${config.identifyCacheMb}, KEY_CACHE_MB ${config.keyCacheMb}, ` +
      `GATEWAY_PROCESSES ${config.gatewayProcesses}, RSS bound ${boundMb} MB`,
  );

  const samples: number[] = [gatewayRssMb(pid)];
  const started = Date.now();
  let identified = 0;
  let failed = 0;
  /** The highest sample: when, and the users answered by the end of the round before it. */
  let max = { mb: samples[0], t: 0, users: 0 };
  const sample = () => {
    const rss = gatewayRssMb(pid);
    const t = Math.round((Date.now() - started) / 1000);
    if (rss > max.mb) max = { mb: rss, t, users: identified };
    samples.push(rss);
    console.log(JSON.stringify({ soak: 'sample', t, users: identified, gatewayRssMb: rss }));
  };
  const sampler = setInterval(sample, SAMPLE_MS);
  let seconds = 0;
  for (let round = 0; identified < USERS; round++) {
    const r = await wrkRound(url, key, `${d.prefix}-${round}`, d.children);
    identified += r.ok;
    failed += r.failed;
    seconds += r.seconds;
  }
  clearInterval(sampler);
  sample();

  const maxMb = max.mb;
  const over = samples.filter((mb) => mb > boundMb).length;
  const summary = {
    soak: 'summary',
    scenario: 'identify-users',
    users: identified,
    failed,
    callsPerSecond: Math.round(identified / seconds),
    identifyCacheMb: config.identifyCacheMb,
    keyCacheMb: config.keyCacheMb,
    gatewayProcesses: config.gatewayProcesses,
    gatewayRssMb: { first: samples[0], max: maxMb, last: samples.at(-1) },
    maxAt: { t: max.t, users: max.users },
    samples: samples.length,
    boundMb,
    samplesOverBound: over,
    withinBound: over === 0,
  };
  console.log(JSON.stringify(summary));
  if (!d.keep) {
    await Promise.all(d.children.map((c) => new Promise<void>((resolve) => (c.exitCode !== null ? resolve() : (c.once('exit', () => resolve()), c.kill())))));
    await dropDatabase(DATABASE_URL);
  }
  rmSync(BUILD_DIR, { recursive: true, force: true });
  if (!summary.withinBound || failed > 0) {
    console.error(
      `soak FAILED: gateway RSS max ${maxMb} MB (bound ${boundMb} MB; ${over} of ${samples.length} samples over it), ${failed} calls not answered 200`,
    );
    process.exitCode = 1;
  }
}
