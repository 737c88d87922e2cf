// One seed, start to end: start the system, run the clients and the nemesis, heal, drain, read
// the final state, export a few people, check, and stop everything. The logs of every process
// (and the history and final state as JSON) are kept when a property is violated.
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { check } from './checker/index.ts';
import type { Snapshot, Violation } from './checker/model.ts';
import { cleanupAll, onCleanup } from './cleanup.ts';
import { POOL_SIZE, poolUser } from './bodies.ts';
import { Gate } from './gate.ts';
import { newShared, runGenerator, runUsersCommand, sleep } from './generator.ts';
import { Recorder, type Org } from './history.ts';
import { heal, runNemesis } from './nemesis.ts';
import { drained, offClock } from './observe.ts';
import { makePlan } from './plan.ts';
import { createRng, type Rng } from './prng.ts';
import { renderViolations, summarize, type Summary } from './report.ts';
import { readSnapshot } from './snapshot.ts';
import { JOIN_BY_EMAIL, RETENTION_DAYS, startSystem, type System } from './system.ts';

/** How long the events queue may take to drain once everything is healed (a batch retried after a fault waits its backoff). */
const DRAIN_BOUND_MS = 120_000;
/** Traffic after the last step, at least: the final state holds calls made after every fault and clock move. */
const TAIL_MS = 10_000;
/** People exported at the end and compared with the database (property 7). */
const FINAL_EXPORTS = 6;

export interface SeedResult {
  summary: Summary;
  violations: Violation[];
  report: string;
}

/** `setup`: the German locale's folder (postgres.ts) and the run's build (build.ts). */
export async function runSeed(
  seed: number,
  minutes: number,
  setup: { locales: string; build: string },
  log: (line: string) => void,
  keep = false,
): Promise<SeedResult> {
  const began = Date.now();
  const plan = makePlan(seed, minutes);
  const dir = mkdtempSync(path.join(tmpdir(), `intake-chaos-${seed}-`));
  // PostgreSQL runs as its own user: it must reach its folders inside.
  chmodSync(dir, 0o755);
  const logDir = mkdtempSync(path.join(tmpdir(), `intake-chaos-${seed}-logs-`));
  let keepLogs = false;
  onCleanup('the run folders', async () => {
    rmSync(dir, { recursive: true, force: true });
    if (!keepLogs) rmSync(logDir, { recursive: true, force: true });
  });
  const rec = new Recorder(seed);
  const rng = createRng(seed);
  const gate = new Gate();
  let stop = false;
  try {
    log(`seed ${seed}: starting PostgreSQL (primary and replica), a Redis Cluster, 2 gateways and 2 workers`);
    const sys = await startSystem({ seed, dir, logDir, ...setup });
    const off = await offClock(sys);
    if (off.length) throw new Error(`processes not on the fake clock at the start: ${off.join('; ')}`);
    log(
      `seed ${seed}: up in ${((Date.now() - began) / 1000).toFixed(1)} s; ${plan.steps.length} steps: ${plan.steps
        .slice(0, 12)
        .map((s) => s.kind)
        .join(', ')}${plan.steps.length > 12 ? ', …' : ''}`,
    );

    const shared = newShared();
    const start = Date.now();
    const load = runGenerator(sys, rec, plan, shared, gate, rng.fork('generator'), () => stop);
    await runNemesis(sys, rec, gate, shared, plan, rng.fork('nemesis'), start, (line) => log(`seed ${seed}: ${line}`));
    // Steady traffic after the last step too: a final state made only of what a clock move left has little to check.
    const left = Math.max(start + plan.loadMs, Date.now() + TAIL_MS) - Date.now();
    await sleep(left);
    stop = true;
    await load;

    log(`seed ${seed}: healing, then draining the queue`);
    const healProblems = await heal(sys);
    const isDrained = await drained(sys, DRAIN_BOUND_MS);
    const snapshot = await readSnapshot(sys, isDrained);
    await finalExports(sys, rec, snapshot, rng.fork('exports'));

    const save = () => {
      keepLogs = true;
      writeFileSync(path.join(logDir, 'history.json'), JSON.stringify(rec.history));
      writeFileSync(path.join(logDir, 'snapshot.json'), JSON.stringify(snapshot));
    };
    // Kept before checking when asked for, so that whatever the check does they are there to read.
    if (keep) save();
    const violations = [
      ...healProblems.map((p): Violation => ({ property: 'runSettled', message: `not healed: ${p}`, subject: 'the system', opIds: [] })),
      ...check(rec.history, snapshot, { retentionDays: RETENTION_DAYS, joinByEmail: JOIN_BY_EMAIL }),
    ];
    if (violations.length) {
      if (!keep) save();
      writeFileSync(path.join(logDir, 'violations.json'), JSON.stringify(violations, null, 1));
    }
    const summary = summarize(rec.history, minutes, Date.now() - began, violations, snapshot.workerEvents ?? {}, keepLogs ? logDir : undefined);
    return { summary, violations, report: renderViolations(rec.history, violations) };
  } catch (err) {
    keepLogs = true;
    writeFileSync(path.join(logDir, 'history.json'), JSON.stringify(rec.history));
    throw Object.assign(err as Error, { logDir });
  } finally {
    // A step that threw leaves the clients running, maybe paused: they stop with everything else.
    stop = true;
    gate.resume();
    await cleanupAll();
  }
}

/**
 * `users export` of a few people, compared with the database by property 7: some with events
 * sent under a padded user ID (the spelling the export must still find), then others.
 */
async function finalExports(sys: System, rec: Recorder, snapshot: Snapshot, rng: Rng): Promise<void> {
  const padded = [
    ...new Set(snapshot.events.filter((r) => r.userId !== null && r.userId !== r.userId.trim()).map((r) => `${r.org}\0${r.userId!.trim()}`)),
  ].sort();
  const people: [Org, string][] = rng
    .shuffle(padded)
    .slice(0, FINAL_EXPORTS - 3)
    .map((key): [Org, string] => key.split('\0') as [Org, string]);
  while (people.length < FINAL_EXPORTS - 1) people.push(['a', poolUser(rng.int(POOL_SIZE))]);
  people.push(['b', poolUser(rng.int(POOL_SIZE))]);
  for (const [org, userId] of people) await runUsersCommand(sys, rec, 'checker', org, 'export', userId, { purpose: 'final-export' });
}
