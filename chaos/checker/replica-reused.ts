// Property 8: after the read replica was stopped and started again while the primary was idle,
// every gateway reads from it again (its intake_read_replica_in_use is 1) within
// REPLICA_REUSE_BOUND_MS of the replica accepting connections.
import type { ReplicaProbe } from '../history.ts';
import type { Context } from './context.ts';
import type { Violation } from './model.ts';

const PROPERTY = 'replicaUsedAgain';

/**
 * A gateway reads the replica's state once a second and a reading counts for 3 s; the replica's
 * WAL receiver reconnects to the primary within its retry interval (5 s). 15 s leaves room for
 * a busy machine; a gateway still on the primary after that will not come back by itself.
 */
export const REPLICA_REUSE_BOUND_MS = 15_000;

export function replicaUsedAgain(ctx: Context): Violation[] {
  const out: Violation[] = [];
  for (const probe of ctx.h.entries.filter((e): e is ReplicaProbe => e.type === 'replica-probe')) {
    for (const gateway of probe.gateways) {
      const samples = probe.samples.filter((s) => s.gateway === gateway);
      const back = samples.find((s) => s.inUse === 1);
      if (back && back.at - probe.replicaUpAt <= REPLICA_REUSE_BOUND_MS) continue;
      const last = samples[samples.length - 1];
      out.push({
        property: PROPERTY,
        message: back
          ? `${gateway} read from the replica again only ${back.at - probe.replicaUpAt} ms after it was up (bound ${REPLICA_REUSE_BOUND_MS} ms)`
          : `${gateway} did not read from the replica again within ${REPLICA_REUSE_BOUND_MS} ms of it being up (intake_read_replica_in_use ${last?.inUse ?? 'absent'} at the last of ${samples.length} samples)`,
        subject: `replica restart (probe #${probe.id})`,
        opIds: [],
        details: samples.filter((_, i) => i % 4 === 0 || i === samples.length - 1).map((s) => `+${s.at - probe.replicaUpAt} ms ${s.gateway}: ${s.inUse}`),
      });
    }
  }
  return out;
}
