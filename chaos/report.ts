// What a seed prints: one JSON summary line, and for each violation the seed, the property and
// the minimal history that shows it.
import type { Violation } from './checker/model.ts';
import { minimalHistory, renderEntry } from './checker/minimal-history.ts';
import { answered, faults, ops, type History, type Op } from './history.ts';

export interface Summary {
  seed: number;
  minutes: number;
  durationMs: number;
  /** Per op kind, per outcome (status, or the error). */
  ops: Record<string, Record<string, number>>;
  faults: Record<string, number>;
  clockMoves: number;
  /** The workers' intake_worker_events_total at the end (stored, dropped, failed…). */
  workerEvents: Record<string, number>;
  violations: Record<string, number>;
  logs?: string;
}

function outcomeOf(op: Op): string {
  switch (op.kind) {
    case 'pipeline':
      return op.answers.map((a) => a.status).join('+') || (op.error ?? 'none');
    case 'forget':
    case 'suppress':
    case 'unsuppress':
    case 'export':
      return `exit ${op.exitCode}`;
    default:
      return answered(op.outcome) ? String(op.outcome.status) : op.outcome.error;
  }
}

export function summarize(
  h: History,
  minutes: number,
  durationMs: number,
  violations: Violation[],
  workerEvents: Record<string, number>,
  logs?: string,
): Summary {
  const byKind: Summary['ops'] = {};
  for (const op of ops(h)) {
    const kind = op.kind === 'forget' && op.suppress ? 'forget-suppress' : op.kind;
    const outcome = outcomeOf(op);
    byKind[kind] ??= {};
    byKind[kind][outcome] = (byKind[kind][outcome] ?? 0) + 1;
  }
  const faultCounts: Record<string, number> = {};
  for (const f of faults(h)) faultCounts[f.kind] = (faultCounts[f.kind] ?? 0) + 1;
  const violationCounts: Record<string, number> = {};
  for (const v of violations) violationCounts[v.property] = (violationCounts[v.property] ?? 0) + 1;
  return {
    seed: h.seed,
    minutes,
    durationMs,
    ops: byKind,
    faults: faultCounts,
    clockMoves: h.entries.filter((e) => e.type === 'clock').length,
    workerEvents,
    violations: violationCounts,
    ...(logs ? { logs } : {}),
  };
}

/** At most this many violations of one property are printed in full (the summary counts them all). */
const PRINTED_PER_PROPERTY = 3;

export function renderViolations(h: History, violations: Violation[]): string {
  const lines: string[] = [];
  const printed = new Map<string, number>();
  for (const v of violations) {
    const n = (printed.get(v.property) ?? 0) + 1;
    printed.set(v.property, n);
    if (n > PRINTED_PER_PROPERTY) continue;
    lines.push(`violation (seed ${h.seed}) ${v.property}: ${v.message}`, `  about: ${v.subject}`);
    for (const d of v.details ?? []) lines.push(`  state: ${d}`);
    for (const e of minimalHistory(h, v)) lines.push(`  ${renderEntry(h, e)}`);
    lines.push('');
  }
  for (const [property, n] of printed)
    if (n > PRINTED_PER_PROPERTY) lines.push(`… and ${n - PRINTED_PER_PROPERTY} more violations of ${property} (seed ${h.seed})`);
  return lines.join('\n');
}
