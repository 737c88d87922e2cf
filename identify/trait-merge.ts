// Identify's merge rules: only the top-level traits sent are written, each only when the
// call's time is at or after that trait's last-written time (so on equal times the later
// arrival wins); values replace whole (no deep merge); null is a value; nothing is removed.
import { jsonEqual } from '../platform/json-equal.ts';

export interface TraitState {
  fields: Record<string, unknown>;
  /** Last-written time of each trait, epoch ms. */
  times: Record<string, number>;
  updatedAt: number;
}

export interface MergeResult extends TraitState {
  /** Traits written by this call. */
  written: string[];
  /** Written traits whose value differs from before (new traits included). */
  changed: string[];
}

export function mergeTraits(current: TraitState | null, traits: Record<string, unknown>, callTime: number): MergeResult {
  return mergeTimed(current, traits, () => callTime, callTime);
}

/**
 * Joining profiles: every trait of `from` is applied to `into` at its own last-written time
 * (the later-written value wins), in one pass (applying them one call at a time copied the
 * profile per trait: quadratic in the number of traits).
 */
export function joinTraits(into: TraitState, from: TraitState): MergeResult {
  return mergeTimed(into, from.fields, (key) => from.times[key] ?? from.updatedAt, from.updatedAt);
}

function mergeTimed(current: TraitState | null, traits: Record<string, unknown>, timeOf: (key: string) => number, latest: number): MergeResult {
  const fields = { ...current?.fields };
  const times = { ...current?.times };
  const written: string[] = [];
  const changed: string[] = [];
  let newest = latest;
  for (const key of Object.keys(traits)) {
    const last = times[key];
    const callTime = timeOf(key);
    newest = Math.max(newest, callTime);
    if (last !== undefined && callTime < last) continue;
    const value = traits[key];
    if (!Object.hasOwn(fields, key) || !jsonEqual(fields[key], value)) changed.push(key);
    defineOwn(fields, key, value);
    defineOwn(times, key, callTime);
    written.push(key);
  }
  const updatedAt = current ? Math.max(current.updatedAt, newest) : newest;
  return { fields, times, updatedAt, written, changed };
}

/** Plain assignment would treat a trait named `__proto__` as the prototype (and defineProperty is slow on wide objects). */
function defineOwn(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}
