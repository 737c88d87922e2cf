// The read replica stopped and started again while the primary is idle (clients paused, the
// queue drained, so no WAL is written): the gateways must read from it again. The runner samples
// each gateway's intake_read_replica_in_use after the replica is up; property 8 judges them.
import type { Gate } from './gate.ts';
import type { Recorder, ReplicaProbe } from './history.ts';
import { drained, replicaInUse } from './observe.ts';
import type { Step } from './plan.ts';
import { REPLICA_REUSE_BOUND_MS } from './checker/replica-reused.ts';
import { sleep } from './generator.ts';
import type { System } from './system.ts';

const SAMPLE_EVERY_MS = 500;

export async function replicaRestartIdle(sys: System, rec: Recorder, gate: Gate, step: Step): Promise<void> {
  try {
    await gate.pause();
    await drained(sys, 30_000);
    const startedAt = Date.now();
    await sys.pg.stopReplica();
    await sleep(step.holdMs);
    await sys.pg.startReplica();
    const replicaUpAt = Date.now();
    rec.add({ type: 'fault', id: rec.id(), kind: 'replica-restart', target: 'PostgreSQL replica', startedAt, endedAt: replicaUpAt, note: 'primary idle' });
    const samples: ReplicaProbe['samples'] = [];
    const seen = new Set<string>();
    // Sample past the bound, so a late return is told from none; stop once every gateway is back.
    while (Date.now() - replicaUpAt < REPLICA_REUSE_BOUND_MS + 5_000 && seen.size < sys.gateways.length) {
      for (const g of sys.gateways) {
        const inUse = await replicaInUse(g);
        samples.push({ gateway: g.name, at: Date.now(), inUse });
        if (inUse === 1) seen.add(g.name);
      }
      await sleep(SAMPLE_EVERY_MS);
    }
    rec.add({ type: 'replica-probe', id: rec.id(), replicaUpAt, samples, gateways: sys.gateways.map((g) => g.name) });
  } finally {
    gate.resume();
  }
}
