// Which partitions of the events queue take Track batches (gateway/event-batcher.ts). A partition
// whose master cannot confirm a batch (its replicas do not acknowledge it, the master is failing
// over or unreachable, or the write does not settle within its share of ENQUEUE_TIMEOUT_MS)
// leaves the rotation at its first such failure: a rotation that remembered nothing would send a
// batch there on every turn, and each would wait out its share before going elsewhere. It comes
// back only when a probe succeeds: a small write confirmed as a batch must be, made off the request
// path, first soon after it left, then at doubling intervals while probes fail, up to a cap. One
// that leaves again soon after coming back resumes its backoff where it was, so a partition that
// passes probes but fails batches costs a batch per cap, not one per base interval.
// Pure rules: the clock is passed in; each transition returns the partition's next state.
import { backoffMs } from './backoff.ts';

/** In the rotation; out of it, waiting for its next probe; out, with a probe under way. */
export type Rotation = 'in' | 'out' | 'probing';

export interface HealthRules {
  /** The wait from leaving the rotation to the first probe. */
  probeBaseMs: number;
  /** The longest wait between probes, however many failed. */
  probeCapMs: number;
  /** A partition back in the rotation this long is trusted again: if it leaves, its probes start from the base. */
  stableMs: number;
}

/**
 * Probes are one small write each, so the cap can be short: a partition whose replica returned
 * is back within about 2 s. The base lets a failover's seconds pass without a probe a millisecond.
 */
export const HEALTH_RULES: HealthRules = { probeBaseMs: 100, probeCapMs: 2000, stableMs: 10_000 };

export interface PartitionHealth {
  readonly rotation: Rotation;
  /** Removals and failed probes since the partition was last stable. */
  readonly failures: number;
  /** When the next probe is due (while out). */
  readonly probeAt: number;
  /** When it last left the rotation. */
  readonly outAt: number;
  /** When it last came back (-Infinity: never left). */
  readonly returnedAt: number;
  /** Times it left the rotation, and came back. */
  readonly removals: number;
  readonly returns: number;
}

/** A partition no batch has failed on. */
export function inRotation(): PartitionHealth {
  return { rotation: 'in', failures: 0, probeAt: 0, outAt: 0, returnedAt: -Infinity, removals: 0, returns: 0 };
}

/** The wait before the next probe after `failures` failures in a row (at least one). */
export function probeDelayMs(failures: number, rules: HealthRules): number {
  return backoffMs(failures - 1, rules.probeBaseMs, rules.probeCapMs);
}

/**
 * A batch on this partition failed for a cause of the partition's own. A partition in the
 * rotation leaves it; one already out is unchanged (batches sent before it left fail late).
 */
export function removed(h: PartitionHealth, now: number, rules: HealthRules): PartitionHealth {
  if (h.rotation !== 'in') return h;
  const failures = now - h.returnedAt < rules.stableMs ? h.failures + 1 : 1;
  return { ...h, rotation: 'out', failures, outAt: now, probeAt: now + probeDelayMs(failures, rules), removals: h.removals + 1 };
}

/** Whether a probe should start now: the partition is out, no probe is under way, and its wait is over. */
export function probeDue(h: PartitionHealth, now: number): boolean {
  return h.rotation === 'out' && now >= h.probeAt;
}

/** A probe starts: at most one at a time, and none for a partition in the rotation. */
export function probeStarted(h: PartitionHealth): PartitionHealth {
  return h.rotation === 'out' ? { ...h, rotation: 'probing' } : h;
}

/** A probe's outcome: back in the rotation, or out until the next, a longer wait away. */
export function probed(h: PartitionHealth, ok: boolean, now: number, rules: HealthRules): PartitionHealth {
  if (h.rotation !== 'probing') return h;
  if (ok) return { ...h, rotation: 'in', returnedAt: now, returns: h.returns + 1 };
  const failures = h.failures + 1;
  return { ...h, rotation: 'out', failures, probeAt: now + probeDelayMs(failures, rules) };
}

/** The partition the next batch goes to: the first in the rotation from `turn` on, in turn; -1 when none is. */
export function nextInTurn(partitions: readonly PartitionHealth[], turn: number): number {
  const n = partitions.length;
  for (let i = 0; i < n; i++) {
    const p = (turn + i) % n;
    if (partitions[p].rotation === 'in') return p;
  }
  return -1;
}
