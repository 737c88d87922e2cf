// The checker: the properties every run must keep, each a pure function of the history, the
// final state and the run's facts, returning its violations. This list is the definition of
// "true answers" for intake under faults and races.
import type { History } from '../history.ts';
import { answersInRequestOrder } from './connection-order.ts';
import { erasureRemovedPerson } from './erasure-complete.ts';
import { exportListsEveryEvent } from './export-complete.ts';
import { identifyApplied } from './identify-applied.ts';
import { type RunFacts, type Snapshot, type Violation } from './model.ts';
import { makeContext, type Context } from './context.ts';
import { refusedStoredNothing } from './refused-stored-nothing.ts';
import { replicaUsedAgain } from './replica-reused.ts';
import { serverErrorsOnlyInFaults } from './server-errors.ts';
import { trackStoredExactlyOnce } from './track-stored.ts';

/** The run itself must reach its final state: queues drained, every clock move followed. */
function runSettled(ctx: Context): Violation[] {
  const out: Violation[] = [];
  if (!ctx.s.drained)
    out.push({ property: 'runSettled', message: 'the events queue did not drain after the faults were healed', subject: 'the events queue', opIds: [] });
  for (const e of ctx.h.entries)
    if (e.type === 'clock' && e.settledAt === null)
      out.push({ property: 'runSettled', message: `a clock move was not followed or settled: ${e.note ?? ''}`, subject: `clock move #${e.id}`, opIds: [] });
  return out;
}

export const PROPERTIES = {
  trackStoredExactlyOnce,
  identifyApplied,
  erasureRemovedPerson,
  refusedStoredNothing,
  serverErrorsOnlyInFaults,
  answersInRequestOrder,
  exportListsEveryEvent,
  replicaUsedAgain,
  runSettled,
} as const;

export function check(h: History, s: Snapshot, facts: RunFacts): Violation[] {
  const ctx = makeContext(h, s, facts);
  return Object.values(PROPERTIES).flatMap((property) => property(ctx));
}

export type { RunFacts, Snapshot, Violation };
