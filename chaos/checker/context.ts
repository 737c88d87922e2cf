// The context every property reads: the history, the final state and the run's facts, with
// what the properties ask of them worked out once (indexes by messageId, user, email; the
// erasures and suppressions; the final state's rows by person), so that checking a
// 30-minute history stays a matter of seconds.
import type { CommandOp, Fault, History, IdentifyOp, Op, Org, TrackOp } from '../history.ts';
import { faults, neverSent, ops } from '../history.ts';
import { messageKeyOf } from './keys.ts';
import { groupBy, isIdentify, isTrack, opSpan, overlaps, faultSpan, trimmed, type RunFacts, type Snapshot } from './model.ts';
import { possiblePerson, type Erasure, type Suppression } from './erasures.ts';

/** The history, the final state and the facts, with what every property asks of them worked out once. */
export interface Context {
  h: History;
  s: Snapshot;
  facts: RunFacts;
  all: Op[];
  faults: Fault[];
  erasures: Erasure[];
  suppressions: Suppression[];
  /** Per organization: the emails each user ID's Identify calls may have written. */
  emails: Record<Org, Map<string, Set<string>>>;
  /** Track ops by `org\0messageId`. */
  tracksByMessage: Map<string, TrackOp[]>;
  /** Identify ops by `org\0trimmed userId`. */
  identifiesByUser: Map<string, IdentifyOp[]>;
  /** Identify ops by `org\0messageId`. */
  identifiesByMessage: Map<string, IdentifyOp[]>;
  /** Identify ops by `org\0` and the key identify_messages holds for their messageId. */
  identifiesByKey: Map<string, IdentifyOp[]>;
  /** Identify ops by `org\0email`. */
  identifiesByEmail: Map<string, IdentifyOp[]>;
  /** When the latest call of a user ID or with an email completed (latestCalls). */
  latest: ReturnType<typeof latestCalls>;
  /** The erasures that may have taken a user ID, by `org\0userId`. */
  erasuresOf: Map<string, Erasure[]>;
  /** The suppressions of a user ID, by `org\0userId`. */
  suppressionsOf: Map<string, Suppression[]>;
  /** The final state's rows by person: user ID (trimmed) or key as `org\0…`, email or address value as `org\0…`. */
  rows: RowsByPerson;
  /** Per Redis key: its strings trimmed, and every token of them between characters an ID of the run never holds. */
  redisTokens: { key: string; org: Org | null; tokens: Set<string> }[];
}

export function makeContext(h: History, s: Snapshot, facts: RunFacts): Context {
  const all = ops(h);
  const emails = { a: emailsByUser(all, 'a'), b: emailsByUser(all, 'b') };
  const erased = all
    .filter((op): op is CommandOp => op.kind === 'forget')
    .map((op) => {
      let joined: string[] = [];
      if (op.exitCode === 0) {
        try {
          joined = ((JSON.parse(op.stdout) as { joinedUserIds?: string[] }).joinedUserIds ?? []).map((u) => u.trim());
        } catch {
          joined = [];
        }
      }
      const userId = op.userId.trim();
      const possible = possiblePerson(facts.joinByEmail[op.org] ? emails[op.org] : null, [userId, ...joined]);
      return { op, org: op.org, userId, joined, succeeded: op.exitCode === 0, possible };
    });
  const suppressions = suppressionSpans(all, erased);
  return {
    h,
    s,
    facts,
    all,
    faults: faults(h),
    erasures: erased,
    suppressions,
    suppressionsOf: groupBy(suppressions, (x) => `${x.org}\0${x.userId}`),
    rows: rowsByPerson(s),
    redisTokens: s.redis.map(({ key, org, strings }) => ({ key, org, tokens: idTokens(strings) })),
    emails,
    tracksByMessage: groupBy(all.filter(isTrack), (op) => `${op.org}\0${op.messageId}`),
    identifiesByUser: groupBy(all.filter(isIdentify), (op) => `${op.org}\0${op.userId.trim()}`),
    identifiesByMessage: groupBy(all.filter(isIdentify), (op) => `${op.org}\0${op.messageId}`),
    identifiesByKey: groupBy(all.filter(isIdentify), (op) => `${op.org}\0${messageKeyOf(op.messageId)}`),
    identifiesByEmail: groupBy(
      all.filter((op): op is IdentifyOp => isIdentify(op) && op.email !== null),
      (op) => `${op.org}\0${op.email}`,
    ),
    latest: latestCalls(all),
    erasuresOf: groupBy(
      erased.flatMap((e) => [...e.possible].map((u) => ({ u, e }))),
      ({ u, e }) => `${e.org}\0${u}`,
      ({ e }) => e,
    ),
  };
}

export interface RowsByPerson {
  profileUsers: Map<string, Snapshot['profileUsers']>;
  events: Map<string, Snapshot['events']>;
  identifyMessages: Map<string, Snapshot['identifyMessages']>;
  journeyRuns: Map<string, Snapshot['journeyRuns']>;
  profiles: Map<string, Snapshot['profiles']>;
  addressClaims: Map<string, Snapshot['addressClaims']>;
}

function rowsByPerson(s: Snapshot): RowsByPerson {
  return {
    profileUsers: groupBy(s.profileUsers, (r) => `${r.org}\0${r.userId}`),
    events: groupBy(
      s.events.filter((r) => trimmed(r.userId) !== null),
      (r) => `${r.org}\0${trimmed(r.userId)}`,
    ),
    identifyMessages: groupBy(
      s.identifyMessages.filter((r) => r.userKey !== null),
      (r) => `${r.org}\0${r.userKey}`,
    ),
    journeyRuns: groupBy(s.journeyRuns, (r) => `${r.org}\0${r.userId}`),
    profiles: groupBy(
      s.profiles.filter((r) => r.email !== null),
      (r) => `${r.org}\0${r.email}`,
    ),
    addressClaims: groupBy(s.addressClaims, (r) => `${r.org}\0${r.value}`),
  };
}

/** An Identify the service may have applied: sent, and not refused as bad or conflicting. */
function mayHaveApplied(op: IdentifyOp): boolean {
  if (neverSent(op.outcome)) return false;
  return !('status' in op.outcome) || op.outcome.status === 200 || op.outcome.status >= 500;
}

/** The emails each user ID's Identify calls carried (organization `org`), from the whole history. */
function emailsByUser(all: Op[], org: Org): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const op of all) {
    if (!isIdentify(op) || op.org !== org || op.email === null || !mayHaveApplied(op)) continue;
    const u = op.userId.trim();
    out.set(u, (out.get(u) ?? new Set()).add(op.email));
  }
  return out;
}

/** When the latest Track or Identify call of a user ID (trimmed) or carrying an email completed, by `org\0userId` / `org\0email`. */
function latestCalls(all: Op[]): { byUser: Map<string, number>; byEmail: Map<string, number> } {
  const byUser = new Map<string, number>();
  const byEmail = new Map<string, number>();
  const later = (map: Map<string, number>, key: string, at: number) => map.set(key, Math.max(map.get(key) ?? -Infinity, at));
  for (const op of all) {
    if ((!isTrack(op) && !isIdentify(op)) || neverSent(op.outcome)) continue;
    const u = trimmed(op.userId);
    if (u !== null) later(byUser, `${op.org}\0${u}`, op.completedAt);
    if (isIdentify(op) && op.email !== null) later(byEmail, `${op.org}\0${op.email}`, op.completedAt);
  }
  return { byUser, byEmail };
}

function suppressionSpans(all: Op[], erased: Erasure[]): Suppression[] {
  const starts: { org: Org; userId: string; at: number; by: number }[] = [];
  for (const op of all) {
    if (op.kind === 'suppress') starts.push({ org: op.org, userId: op.userId.trim(), at: op.invokedAt, by: op.id });
    if (op.kind === 'forget' && op.suppress) {
      const e = erased.find((x) => x.op.id === op.id)!;
      for (const u of e.possible) starts.push({ org: op.org, userId: u, at: op.invokedAt, by: op.id });
    }
  }
  return starts.map((s) => {
    // Only an unsuppress that exited 0 certainly lifted it.
    const lift = all.find((op) => op.kind === 'unsuppress' && op.org === s.org && op.userId.trim() === s.userId && op.invokedAt > s.at && op.exitCode === 0);
    return { org: s.org, userId: s.userId, from: s.at, to: lift ? lift.completedAt : Infinity, by: s.by };
  });
}

/**
 * What a Redis key may hold of a raw user ID: each of its strings trimmed, and each run of
 * word characters and hyphens inside them (the run's user IDs are made of those, so an ID
 * inside a longer string is one of these tokens: `{"userId":"u-7"}` holds `u-7`, `u-70` does not).
 */
export function idTokens(strings: string[]): Set<string> {
  const out = new Set<string>();
  for (const text of strings) {
    out.add(text.trim());
    for (const token of text.split(/[^\w-]+/)) if (token) out.add(token);
  }
  return out;
}

export function faultsOverlapping(ctx: Context, op: Op, recoveryMs = 0, kinds?: Set<string>): Fault[] {
  return ctx.faults.filter((f) => (!kinds || kinds.has(f.kind)) && overlaps(faultSpan(f, recoveryMs), opSpan(op)));
}
