// The read replica stopped and started again while the primary is idle (clients paused, the
// queue drained, the workers frozen so that no journey timer or maintenance round writes, and no
// WAL written for a while): the gateways must read from it again. A restarted replica of an idle
// primary reports what it received as the start of its last WAL segment until something new
// streams, so a gateway that compared that with what it replayed would never read from it. The
// runner samples each gateway's intake_read_replica_in_use after the replica is up; property 8
// judges them.
import type { Gate } from './gate.ts';
import type { Recorder, ReplicaProbe } from './history.ts';
import { drained, replicaInUse } from './observe.ts';
import type { Step } from './plan.ts';
import { REPLICA_REUSE_BOUND_MS } from './checker/replica-reused.ts';
import { sleep } from './generator.ts';
import { queryOnce } from './postgres.ts';
import { DATABASE, type System } from './system.ts';

const SAMPLE_EVERY_MS = 500;

/**
 * How long the primary must have written no WAL before the replica stops: after a write,
 * PostgreSQL logs one record of its own within 15 s (a standby snapshot); past that an idle
 * primary writes nothing, and a restarted replica has nothing new to receive.
 */
const PRIMARY_IDLE_MS = 16_000;
/** A primary that keeps writing (a maintenance round, an autovacuum) is waited for this long at most. */
const PRIMARY_IDLE_BOUND_MS = 60_000;

/** Waits until the primary's WAL position has not moved for PRIMARY_IDLE_MS; false when it kept moving. */
async function primaryIdle(sys: System): Promise<boolean> {
  const lsn = async () => (await queryOnce<{ lsn: string }>(sys.pg.primaryUrl(DATABASE), 'SELECT pg_current_wal_lsn()::text AS lsn'))[0].lsn;
  const deadline = Date.now() + PRIMARY_IDLE_BOUND_MS;
  let last = await lsn();
  let since = Date.now();
  while (Date.now() - since < PRIMARY_IDLE_MS) {
    if (Date.now() > deadline) return false;
    await sleep(500);
    const now = await lsn();
    if (now !== last) [last, since] = [now, Date.now()];
  }
  return true;
}

export async function replicaRestartIdle(sys: System, rec: Recorder, gate: Gate, step: Step): Promise<void> {
  let frozen = false;
  try {
    await gate.pause();
    await drained(sys, 30_000);
    for (const w of sys.workers) w.freeze(true);
    frozen = true;
    const idle = await primaryIdle(sys);
    const startedAt = Date.now();
    await sys.pg.stopReplica();
    await sleep(step.holdMs);
    await sys.pg.startReplica();
    const replicaUpAt = Date.now();
    rec.add({
      type: 'fault',
      id: rec.id(),
      kind: 'replica-restart',
      target: 'PostgreSQL replica',
      startedAt,
      endedAt: replicaUpAt,
      note: idle ? 'primary idle' : 'the primary kept writing WAL',
    });
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
    if (frozen) for (const w of sys.workers) w.freeze(false);
    gate.resume();
  }
}
