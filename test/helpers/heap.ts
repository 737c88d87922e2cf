// Measures what the gateway's caches really take on the heap, to check what they count
// (platform/heap-size.ts): fill a cache with representative entries, collect garbage, compare
// the heap before and after. Shared by test/unit/cache-memory.test.ts and bench/cache-cost.mts.
import { randomUUID } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { emptyPlan, type Plan } from '../../identify/identify-plan.ts';
import type { KeyRecord } from '../../environments/environment-store.ts';

/** V8's gc(), without --expose-gc on the command line: the flag is read when a context is made. */
export function exposeGc(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * Heap bytes that what `fill` builds and returns keeps alive: used heap after a full collection,
 * less before. The result of `fill` is held until after the second measure.
 */
export function heapDelta(gc: () => void, fill: () => unknown): number {
  gc();
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept = fill();
  gc();
  gc();
  const after = process.memoryUsage().heapUsed;
  if (kept === undefined) throw new Error('fill() must return what it built');
  return after - before;
}

const T0 = 1767261600000;

/** The kinds of profile the measurements use: what Identify keeps for a user of each. */
export const PROFILE_SHAPES = {
  /** A few ASCII traits with an email (an address claim), the common case; a fresh environment id, as read from PostgreSQL. */
  small: (j: number) => ({ traits: { plan: 'pro', visits: j, email: `user-${j}@shop.example`, name: `User ${j}` }, email: `user-${j}@shop.example` }),
  /** Two kilobytes of one trait. */
  large: (j: number) => ({ traits: { note: 'x'.repeat(2000) + j }, email: null }),
  /** Text outside ASCII: V8 keeps such strings at two bytes a character. */
  unicode: (j: number) => ({ traits: { name: `Zoë Ünïcødé ${j}`, city: '東京' }, email: null }),
} as const;

export type ProfileShape = keyof typeof PROFILE_SHAPES;

/**
 * A committed batch's plan of `n` new profiles, one user each, built as the planner builds one:
 * ids from randomUUID, texts from JSON.stringify, userRefs from a template literal, the
 * environment id a string of its own.
 */
export function profilePlan(shape: ProfileShape, from: number, n: number): Plan {
  const plan = emptyPlan();
  for (let j = from; j < from + n; j++) {
    const { traits, email } = PROFILE_SHAPES[shape](j);
    const envId: string = JSON.parse(`"${randomUUID()}"`);
    const id = randomUUID();
    const times = Object.fromEntries(Object.keys(traits).map((k) => [k, T0 + j]));
    plan.profiles.push({
      id,
      envId,
      fields: JSON.stringify(traits),
      times: JSON.stringify(times),
      updatedAt: T0 + j,
      email,
      createdAt: T0,
      claims: null,
      latest: email === null ? {} : { email: { channel: 'email', value: email, at: T0 + j, order: 2 ** 52 + j } },
      isNew: true,
    });
    plan.userProfiles.push([`${envId}:${'user-' + j}`, id]);
  }
  return plan;
}

/** A key lookup's answer as findKeyByHash builds it: strings of its own, `active` or `revoked`. */
export function keyRecord(j: number, status = 'active'): KeyRecord {
  return JSON.parse(
    JSON.stringify({
      status,
      environment: {
        id: randomUUID(),
        organizationSlug: `org-${j}`,
        pathValue: `org-${j}`,
        environmentKey: 'prod',
        isProduction: true,
        removed: false,
        features: j % 2 ? ['join-by-email'] : [],
      },
    }),
  ) as KeyRecord;
}
