// What a seed runs: the clients' mix of operations and the timeline of faults and scenarios.
// Pure: the same seed and length give the same plan, so a failing seed can be run again.
import { createRng, type Rng } from './prng.ts';

/** Every fault and staged scenario the nemesis knows; `npm run chaos -- --ci` stages each at least once. */
export const STEP_KINDS = [
  'gateway-kill',
  'worker-kill',
  'redis-freeze',
  'redis-master-kill',
  'pg-freeze',
  'pg-restart',
  'replica-restart-idle',
  'clock-forward-1d',
  'retention-resend',
  'erasure-under-joins',
] as const;
export type StepKind = (typeof STEP_KINDS)[number];

export interface Step {
  /** ms after the start of the load when the step may begin (it waits for the one before it). */
  at: number;
  kind: StepKind;
  /** Which gateway / worker / partition's master (an index, taken modulo what exists). */
  target: number;
  /** How long the fault lasts (freezes, a server down), ms. */
  holdMs: number;
  /** erasure-under-joins: Identify calls per second from new user IDs carrying the person's email. */
  joinRate: number;
  /** erasure-under-joins: when the erasure starts after the joins began, ms. */
  eraseAfterMs: number;
  /** retention-resend: how many earlier messageIds are sent again after the clock moved. */
  resends: number;
}

/** The clients' operations. */
export const GENERATED_KINDS = ['track', 'track-resend', 'identify', 'identify-retry', 'identify-conflict', 'profile', 'pipeline', 'bad'] as const;
export type GeneratedKind = (typeof GENERATED_KINDS)[number];

export const OPERATOR_KINDS = ['forget', 'forget-suppress', 'suppress', 'unsuppress', 'export'] as const;
export type OperatorKind = (typeof OPERATOR_KINDS)[number];

export interface Plan {
  seed: number;
  minutes: number;
  /** How long the clients run (the steps may make it longer: the last one is waited for). */
  loadMs: number;
  clients: number;
  /** Each client's pause between two requests, ms (keeps the whole at a few hundred requests a second). */
  thinkMs: [number, number];
  weights: Record<GeneratedKind, number>;
  /** Share of requests that go to organization b (no join-by-email). */
  orgBShare: number;
  operatorEveryMs: [number, number];
  operatorWeights: Record<OperatorKind, number>;
  steps: Step[];
}

/**
 * One step every this many ms of load: long enough for a step (a freeze of up to 10 s, a
 * restart, a clock move and its settling) and some steady traffic between two.
 */
export const STEP_SPACING_MS = 12_000;
/** The first step waits for this much history: operations the faults can act on. */
const FIRST_STEP_MS = 5_000;

const BASE_WEIGHTS: Record<GeneratedKind, number> = {
  track: 34,
  'track-resend': 8,
  identify: 24,
  'identify-retry': 5,
  'identify-conflict': 3,
  profile: 12,
  pipeline: 5,
  bad: 5,
};

const BASE_OPERATOR_WEIGHTS: Record<OperatorKind, number> = {
  forget: 30,
  'forget-suppress': 10,
  suppress: 15,
  unsuppress: 20,
  export: 25,
};

function jitter<K extends string>(rng: Rng, weights: Record<K, number>): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const [k, w] of Object.entries(weights) as [K, number][]) out[k] = Math.max(1, Math.round(w * (0.7 + 0.6 * rng.next())));
  return out;
}

function step(rng: Rng, kind: StepKind, at: number): Step {
  const holdMs =
    kind === 'pg-freeze'
      ? rng.between(2_000, 10_000)
      : kind === 'redis-freeze'
        ? rng.between(2_000, 5_000)
        : kind === 'pg-restart'
          ? rng.between(1_000, 4_000)
          : rng.between(1_000, 3_000);
  return {
    at,
    kind,
    target: rng.int(6),
    holdMs,
    joinRate: rng.between(100, 200),
    eraseAfterMs: rng.between(1_000, 3_000),
    resends: rng.between(10, 25),
  };
}

export function makePlan(seed: number, minutes: number): Plan {
  const rng = createRng(seed).fork('plan');
  const loadMs = Math.round(minutes * 60_000);
  const count = Math.max(1, Math.floor(loadMs / STEP_SPACING_MS));
  // Every kind once per round, each round in a seeded order of its own: a long run stages every kind again and again, next to different neighbours.
  let order: StepKind[] = [];
  const steps = Array.from({ length: count }, (_, i) => {
    if (i % STEP_KINDS.length === 0) order = rng.shuffle(STEP_KINDS);
    return step(rng, order[i % STEP_KINDS.length], FIRST_STEP_MS + i * STEP_SPACING_MS);
  });
  return {
    seed,
    minutes,
    loadMs,
    clients: rng.between(4, 6),
    thinkMs: [5, rng.between(20, 40)],
    weights: jitter(rng, BASE_WEIGHTS),
    orgBShare: 0.1 + 0.1 * rng.next(),
    operatorEveryMs: [3_000, rng.between(6_000, 9_000)],
    operatorWeights: jitter(rng, BASE_OPERATOR_WEIGHTS),
    steps,
  };
}

/** `--ci`: these seeds at this length stage every step kind between them (test/unit/chaos-plan.test.ts checks it). */
export const CI_MINUTES = 0.8;
export const CI_SEEDS = [1, 5, 13] as const;
