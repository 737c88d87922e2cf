// npm run erasure-joins — `intake users forget` while others join the person: in an
// organization that joins profiles by email, Identify calls from new user IDs carrying the
// person's email arrive at JOINS_RATE a second (default 200) through a gateway; 3 s in, the
// erasure is run as an operator runs it (`intake users forget`, its own process, compiled build)
// and timed from its start to its exit. The joins go on for 2 s after it. Each of RUNS runs
// (default 10) must exit 0 within BOUND_MS (2,000) and leave nothing of the person: no profile
// of theirs, none of the user IDs it reported as joined. Prints a line per run and one JSON
// summary; exits 1 when a run misses. Runs in a database of its own
// (ERASURE_JOINS_DATABASE_URL, default `intake_erasure_joins`), dropped at the end.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { keyCreate } from '../cli/commands/key.ts';
import { orgCreate } from '../cli/commands/org.ts';
import { openOperator } from '../operations/operator.ts';
import { loadConfig } from '../platform/config.ts';
import { createDb } from '../platform/db.ts';
import { migrate } from '../cli/migrate.ts';
import { dropDatabase } from './databases.mts';
import { startProcess, stopProcess } from './processes.mts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const RUNS = Number(process.env.ERASURE_JOINS_RUNS ?? 10);
const JOINS_RATE = Number(process.env.ERASURE_JOINS_RATE ?? 200);
const ERASE_AFTER_MS = 3_000;
const JOINS_AFTER_MS = 2_000;
const BOUND_MS = 2_000;
const DATABASE_URL = process.env.ERASURE_JOINS_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_erasure_joins';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
/** The run's build, under node_modules so that its imports resolve to the checkout's dependencies. */
const BUILD_DIR = path.join(ROOT, 'node_modules', '.cache', 'intake-erasure-joins-dist');
const PREFIX = `erasure-joins-${process.pid}`;
const ENV = { DATABASE_URL, REDIS_URL, QUEUE_PREFIX: PREFIX, INTAKE_ENV_FILE: '', INTAKE_RUN: 'dist', INTAKE_DIST: BUILD_DIR };

const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });

function identify(port: number, slug: string, key: string, userId: string, email: string, messageId: string): Promise<number> {
  const body = JSON.stringify({ userId, messageId, timestamp: new Date().toISOString(), traits: { email, plan: 'joined' } });
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: `/api/identify/${slug}`, method: 'POST', agent, headers: { 'content-type': 'application/json', 'x-api-key': key } },
      (res) => {
        res.resume();
        res.once('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.once('error', () => resolve(0));
    req.end(body);
  });
}

/** Runs `intake <args>` from the build; resolves with its exit code, stdout and wall time. */
function intake(args: string[]): Promise<{ code: number; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/intake.js'), ...args], { env: { ...process.env, ...ENV }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('exit', (code) => resolve({ code: code ?? 1, stdout, stderr, ms: performance.now() - started }));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface RunResult {
  run: number;
  exitCode: number;
  ms: number;
  joinedUserIds: number;
  joinsAnswered: number;
  joinsPerSecond: number;
  left: number;
  error?: string;
}

async function oneRun(i: number, port: number, slug: string, key: string, db: pg.Pool): Promise<RunResult> {
  const person = `person-${i}`;
  const email = `person-${i}@example.test`;
  if ((await identify(port, slug, key, person, email, `${person}-m0`)) !== 200) throw new Error(`the person's first Identify was not answered 200`);
  let n = 0;
  let answered = 0;
  let stop = false;
  const pending = new Set<Promise<unknown>>();
  const loadStarted = performance.now();
  const load = (async () => {
    const tick = 20;
    let owed = 0;
    while (!stop) {
      owed = Math.min(owed + (JOINS_RATE * tick) / 1000, JOINS_RATE);
      for (; owed >= 1; owed--) {
        const k = ++n;
        const call = identify(port, slug, key, `${person}-joiner-${k}`, email, `${person}-j${k}`).then((status) => {
          if (status === 200) answered++;
          pending.delete(call);
        });
        pending.add(call);
      }
      await sleep(tick);
    }
  })();
  await sleep(ERASE_AFTER_MS);
  const erased = await intake(['users', 'forget', slug, person]);
  await sleep(JOINS_AFTER_MS);
  stop = true;
  await load;
  await Promise.all(pending);
  const seconds = (performance.now() - loadStarted) / 1000;
  let joined: string[] = [];
  let error: string | undefined;
  try {
    joined = (JSON.parse(erased.stdout) as { joinedUserIds: string[] }).joinedUserIds;
  } catch {
    error = erased.stderr.trim() || 'no JSON on stdout';
  }
  // What is left of the person: their own user ID, and any user ID the erasure reported, still on a profile.
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM profile_users pu JOIN profiles p ON p.id = pu.profile_id JOIN environments e ON e.id = p.environment_id
      WHERE e.path_value = $1 AND pu.user_id = ANY($2::text[])`,
    [slug, [person, ...joined]],
  );
  return {
    run: i,
    exitCode: erased.code,
    ms: Math.round(erased.ms),
    joinedUserIds: joined.length,
    joinsAnswered: answered,
    joinsPerSecond: Math.round(answered / seconds),
    left: Number(rows[0].n),
    ...(error ? { error } : {}),
  };
}

async function main(): Promise<number> {
  const children: ChildProcess[] = [];
  await migrate(DATABASE_URL);
  const config = loadConfig({ ...process.env, DATABASE_URL, REDIS_URL, QUEUE_PREFIX: PREFIX });
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  try {
    const operator = openOperator(config, createDb(config));
    const slug = `joins-${process.pid}`;
    await orgCreate(operator, [slug, '--features', 'join-by-email']);
    const { key } = await keyCreate(operator, [slug]);
    await operator.close();
    execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--out-dir', BUILD_DIR, '--no-check'], { stdio: ['ignore', 'ignore', 'inherit'] });
    const gateway = await startProcess(
      ['bin/intake.js', 'gateway'],
      { ...ENV, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      /gateway listening/,
      children,
    );
    try {
      const results: RunResult[] = [];
      for (let i = 1; i <= RUNS; i++) {
        const r = await oneRun(i, gateway.port, slug, key, pool);
        results.push(r);
        console.log(JSON.stringify(r));
      }
      const within = results.filter((r) => r.exitCode === 0 && r.ms <= BOUND_MS && r.left === 0).length;
      const ms = results.map((r) => r.ms).sort((a, b) => a - b);
      console.log(
        JSON.stringify({
          scenario: 'erasure-under-joins',
          runs: RUNS,
          joinsRate: JOINS_RATE,
          within: `${within} of ${RUNS}`,
          ms: { min: ms[0], median: ms[Math.floor(ms.length / 2)], max: ms[ms.length - 1] },
          boundMs: BOUND_MS,
        }),
      );
      return within === RUNS ? 0 : 1;
    } finally {
      await stopProcess(gateway.child);
    }
  } finally {
    await pool.end();
    agent.destroy();
    await dropDatabase(DATABASE_URL);
  }
}

process.exit(await main());
