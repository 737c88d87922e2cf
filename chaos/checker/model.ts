// What the properties share: the final state's shape, the run's facts, what a violation says,
// and the rules of time: when the service may have received a call, when a call was certainly
// before another, when an event's identity window ends. Pure functions.
import type { Fault, IdentifyOp, Op, Org, TrackOp } from '../history.ts';

export const DAY_MS = 86_400_000;

/**
 * How far a receipt time (the gateway's fake clock) may sit outside the runner's window of the
 * request: every process reads the offset file at most once a second, and the clock only moves
 * while no request is in flight, so a second and a half covers a busy machine.
 */
export const RECEIPT_SLACK_MS = 1_500;

/**
 * How long after a day's events have passed the retention the product may still hold them (or
 * their messageIds): storage maintenance runs every STORAGE_MAINTENANCE_MS (2 s in a run), and
 * a drop removes the messageId records in batches after the partition. A resend that arrives
 * within this long after the window ended may still be taken for a duplicate.
 */
export const RETENTION_SETTLE_MS = 15_000;

/** The final state, read once the faults were healed and the queues drained. */
export interface Snapshot {
  /** When it was read (real clock) and the fake clock's offset then. */
  takenAt: number;
  offsetMs: number;
  events: { org: Org; messageId: string; userId: string | null; receivedAt: number }[];
  profileUsers: { org: Org; userId: string; profileId: string }[];
  profiles: { org: Org; id: string; email: string | null }[];
  /** identify_messages: the messageId's key (uuid text) and the user's key (int8 as text). */
  identifyMessages: { org: Org; messageKey: string; userKey: string | null }[];
  journeyRuns: { org: Org; userId: string; triggerKey: string }[];
  /** event_ids rows with no row of events for their messageId: the SHA-256 (hex) of the messageId. */
  orphanMessageIds: { org: Org; messageHash: string; receivedAt: number }[];
  addressClaims: { org: Org; value: string }[];
  /**
   * Every Redis key of the run with the strings found in it (its name, fields, values, JSON
   * leaves), and the org whose environment its name names (the live view's and the refused
   * calls' lists are per environment); null for a key of no one environment (a queue's jobs mix
   * both orgs' events), which counts for either.
   */
  redis: { key: string; org: Org | null; strings: string[] }[];
  /** Whether the events queue was empty with no active job when the state was read. */
  drained: boolean;
  /** The workers' intake_worker_events_total per outcome (for the summary). */
  workerEvents?: Record<string, number>;
}

export interface RunFacts {
  retentionDays: number;
  joinByEmail: Record<Org, boolean>;
}

export interface Violation {
  property: string;
  message: string;
  /** What it is about, for the report's heading: a messageId, a person, a connection. */
  subject: string;
  /** The ops that show it (the minimal history adds the faults and clock moves around them). */
  opIds: number[];
  /** Rows of the final state that show it. */
  details?: string[];
}

// ---- time ------------------------------------------------------------------------------------

/** When the service may have received `op`, on its (fake) clock. */
export function receiptWindow(op: Op): [number, number] {
  return [op.invokedAt + op.offsetMs - RECEIPT_SLACK_MS, op.completedAt + op.offsetMs + RECEIPT_SLACK_MS];
}

export const within = (t: number, [from, to]: [number, number]) => t >= from && t <= to;

/** `a` completed before `b` was invoked: certainly before it, whatever happened inside either. */
export const certainlyBefore = (a: Op, b: Op) => a.completedAt < b.invokedAt;

/** The end of the UTC day of `t`. */
export const endOfUtcDay = (t: number) => (Math.floor(t / DAY_MS) + 1) * DAY_MS;

/**
 * The end of the identity window of an event received at `receivedAt`: its day's partition is
 * dropped once all of it is older than the retention, and a resend from then on is a new event.
 */
export const identityWindowEnd = (receivedAt: number, retentionDays: number) => endOfUtcDay(receivedAt) + retentionDays * DAY_MS;

/** The fake time at which the final state was read. */
export const checkedAt = (s: Snapshot) => s.takenAt + s.offsetMs;

/** A fault's span, with the recovery window after it: `recoveryMs` more at its end. */
export const faultSpan = (f: Fault, recoveryMs = 0): [number, number] => [f.startedAt, f.endedAt + recoveryMs];

export const overlaps = ([a0, a1]: [number, number], [b0, b1]: [number, number]) => a0 <= b1 && b0 <= a1;

export const opSpan = (op: Op): [number, number] => [op.invokedAt, op.completedAt];

/** Faults that reach PostgreSQL's primary. */
export const POSTGRES_FAULTS = new Set(['pg-freeze', 'pg-restart']);

// ---- calls ---------------------------------------------------------------------------------

export const trimmed = (userId: string | null) => (userId === null ? null : userId.trim() || null);

export const isTrack = (op: Op): op is TrackOp => op.kind === 'track';
export const isIdentify = (op: Op): op is IdentifyOp => op.kind === 'identify';

/** The error text of a JSON answer, or null. */
export function errorOf(body: string): string | null {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    return typeof parsed.error === 'string' ? parsed.error : null;
  } catch {
    return null;
  }
}

export function jsonField(body: string, field: string): unknown {
  try {
    return (JSON.parse(body) as Record<string, unknown>)[field];
  } catch {
    return undefined;
  }
}

/** Group `items` by a key (each kept as `value` gives it). */
export function groupBy<T, V = T>(items: Iterable<T>, key: (t: T) => string, value: (t: T) => V = (t) => t as unknown as V): Map<string, V[]> {
  const out = new Map<string, V[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list) list.push(value(item));
    else out.set(k, [value(item)]);
  }
  return out;
}
