// The nemesis's plain faults, each recorded with when it began and when everything it broke was
// back: SIGKILL and restart of a gateway or a worker, a Redis master frozen or killed (its
// replica promoted, the node back as a replica), PostgreSQL's primary frozen or stopped.
import type { FaultKind, Recorder } from './history.ts';
import type { Step } from './plan.ts';
import { freeze, masters, promoted, thaw, waitWhole } from './redis-faults.ts';
import type { System } from './system.ts';
import { sleep } from './generator.ts';

async function recorded(rec: Recorder, kind: FaultKind, target: string, work: () => Promise<string | void>): Promise<void> {
  const startedAt = Date.now();
  const note = await work();
  rec.add({ type: 'fault', id: rec.id(), kind, target, startedAt, endedAt: Date.now(), ...(note ? { note } : {}) });
}

export async function processKill(sys: System, rec: Recorder, step: Step, role: 'gateway' | 'worker'): Promise<void> {
  const list = role === 'gateway' ? sys.gateways : sys.workers;
  const victim = list[step.target % list.length];
  await recorded(rec, role === 'gateway' ? 'gateway-kill' : 'worker-kill', victim.name, async () => {
    await victim.kill('SIGKILL');
    await sleep(step.holdMs);
    await victim.start();
  });
}

export async function redisFreeze(sys: System, rec: Recorder, step: Step): Promise<void> {
  const all = await masters(sys.redis);
  const victim = all[step.target % all.length];
  await recorded(rec, 'redis-freeze', `redis master :${victim.port}`, async () => {
    freeze(victim);
    await sleep(step.holdMs);
    thaw(victim);
    // Frozen past cluster-node-timeout, its replica took over; it comes back as that one's replica.
    if (!(await waitWhole(sys.redis))) return 'the cluster was not whole again within 45 s';
  });
}

export async function redisMasterKill(sys: System, rec: Recorder, step: Step): Promise<void> {
  const ranges = await sys.redis.slotRanges();
  const all = await masters(sys.redis);
  const victim = all[step.target % all.length];
  const slot = ranges.get(victim.port)![0][0];
  await recorded(rec, 'redis-master-kill', `redis master :${victim.port}`, async () => {
    sys.redis.kill(victim);
    const took = await promoted(sys.redis, victim.port, slot);
    await sys.redis.restart(victim);
    const back = await waitWhole(sys.redis);
    if (!took || !back) return `${took ? '' : 'no replica took the slots over within 30 s; '}${back ? '' : 'the cluster was not whole again within 45 s'}`;
  });
}

export async function postgresFreeze(sys: System, rec: Recorder, step: Step): Promise<void> {
  await recorded(rec, 'pg-freeze', 'PostgreSQL primary', async () => {
    sys.pg.freezePrimary();
    await sleep(step.holdMs);
    sys.pg.thawPrimary();
  });
}

export async function postgresRestart(sys: System, rec: Recorder, step: Step): Promise<void> {
  await recorded(rec, 'pg-restart', 'PostgreSQL primary', async () => {
    await sys.pg.stopPrimary();
    await sleep(step.holdMs);
    await sys.pg.startPrimary();
  });
}
