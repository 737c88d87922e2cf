// The nemesis: runs the plan's steps one after another at their times (a step waits for the one
// before it), then heals everything before the final check.
import { clockForward, retentionResend } from './clock-steps.ts';
import { postgresFreeze, postgresRestart, processKill, redisFreeze, redisMasterKill } from './faults.ts';
import type { Gate } from './gate.ts';
import { sleep, type Shared } from './generator.ts';
import type { Recorder } from './history.ts';
import { erasureUnderJoins } from './join-erasure.ts';
import type { Plan, Step } from './plan.ts';
import type { Rng } from './prng.ts';
import { healRedis } from './redis-faults.ts';
import { replicaRestartIdle } from './replica-step.ts';
import { queryOnce } from './postgres.ts';
import { DATABASE, type System } from './system.ts';

export async function runStep(sys: System, rec: Recorder, gate: Gate, shared: Shared, step: Step, rng: Rng, index: number): Promise<void> {
  switch (step.kind) {
    case 'gateway-kill':
      return processKill(sys, rec, step, 'gateway');
    case 'worker-kill':
      return processKill(sys, rec, step, 'worker');
    case 'redis-freeze':
      return redisFreeze(sys, rec, step);
    case 'redis-master-kill':
      return redisMasterKill(sys, rec, step);
    case 'pg-freeze':
      return postgresFreeze(sys, rec, step);
    case 'pg-restart':
      return postgresRestart(sys, rec, step);
    case 'replica-restart-idle':
      return replicaRestartIdle(sys, rec, gate, step);
    case 'clock-forward-1d':
      return clockForward(sys, rec, gate);
    case 'retention-resend':
      return retentionResend(sys, rec, gate, shared, step, rng);
    case 'erasure-under-joins':
      return erasureUnderJoins(sys, rec, step, index);
  }
}

/** Runs every step at its time after `start`; resolves when the last is done. */
export async function runNemesis(sys: System, rec: Recorder, gate: Gate, shared: Shared, plan: Plan, rng: Rng, start: number, log: (line: string) => void) {
  for (const [i, step] of plan.steps.entries()) {
    const wait = start + step.at - Date.now();
    if (wait > 0) await sleep(wait);
    log(`step ${i + 1}/${plan.steps.length}: ${step.kind}`);
    await runStep(sys, rec, gate, shared, step, rng.fork(`step-${i}`), i);
  }
}

async function answers(url: string): Promise<boolean> {
  try {
    await queryOnce(url, 'SELECT 1', [], 3_000);
    return true;
  } catch {
    return false;
  }
}

/** Everything back: PostgreSQL thawed and both servers up, every Redis node up and the cluster whole, every process running. */
export async function heal(sys: System): Promise<string[]> {
  const problems: string[] = [];
  sys.pg.thawPrimary();
  if (!(await answers(sys.pg.primaryUrl(DATABASE)))) await sys.pg.startPrimary().catch((err: Error) => problems.push(`PostgreSQL primary: ${err.message}`));
  if (!(await answers(sys.pg.replicaUrl(DATABASE)))) await sys.pg.startReplica().catch((err: Error) => problems.push(`PostgreSQL replica: ${err.message}`));
  if (!(await healRedis(sys.redis))) problems.push('the Redis Cluster was not whole within 60 s');
  for (const p of [...sys.gateways, ...sys.workers]) if (!p.running) await p.start().catch((err: Error) => problems.push(`${p.name}: ${err.message}`));
  return problems;
}
