// Which daily partitions of `events` should exist and which retention removes: pure rules of
// time, with the clock passed in (the trusted clock: platform/trusted-clock.ts). A partition holds one UTC day of received_at, [day, day + 1),
// and is named after it (events_p20261127), so its name alone gives its bounds.

import { isTooFarAhead } from './future-bound.ts';

export const DAY_MS = 86_400_000;
const NAME = /^events_p(\d{4})(\d{2})(\d{2})$/;

/** The start (epoch ms) of the UTC day holding `ms`. */
export function utcDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

/** The partition of the UTC day starting at `day`. */
export function partitionName(day: number): string {
  return `events_p${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;
}

/** The day (epoch ms) a partition's name stands for, or null for any other name. */
export function partitionDay(name: string): number | null {
  const m = NAME.exec(name);
  if (!m) return null;
  const day = Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]));
  return partitionName(day) === name ? day : null;
}

/**
 * The days whose partitions must exist at `now`, oldest first: yesterday (an event received
 * just before midnight may be stored just after it) through `aheadDays` after today, less
 * those that exist.
 */
export function daysToCreate(existing: ReadonlySet<number>, now: number, aheadDays: number): number[] {
  const today = utcDay(now);
  const due: number[] = [];
  for (let d = -1; d <= aheadDays; d++) {
    const day = today + d * DAY_MS;
    if (!existing.has(day)) due.push(day);
  }
  return due;
}

/** The days from the one holding `from` to the one holding `to`, each once, oldest first. */
export function daysBetween(from: number, to: number): number[] {
  const days: number[] = [];
  for (let day = utcDay(from); day <= utcDay(to); day += DAY_MS) days.push(day);
  return days;
}

/**
 * The oldest received_at retention keeps at `now` (null: keep forever). An event received
 * before it is past the retention, and a partition is dropped once all of its day is.
 */
export function retentionBound(now: number, retentionDays: number | null): number | null {
  return retentionDays === null ? null : now - retentionDays * DAY_MS;
}

/**
 * The start of the oldest day retention keeps whole at `now` (null: forever): every event
 * received before it is in a partition past the retention, due to be dropped, and its
 * messageId is free again (event-store.ts). The one rule of when an event's day expires.
 */
export function retentionCutoff(now: number, retentionDays: number | null): number | null {
  const bound = retentionBound(now, retentionDays);
  return bound === null ? null : utcDay(bound);
}

/** The partitions past the retention at `now`: every event they can hold is older than the cutoff. */
export function daysPastRetention(days: readonly number[], now: number, retentionDays: number | null): number[] {
  const cutoff = retentionCutoff(now, retentionDays);
  if (cutoff === null) return [];
  return days.filter((day) => day < cutoff).sort((a, b) => a - b);
}

/** How many whole days after today have their partition, counted without a gap: 0 when tomorrow's is missing. */
export function daysAhead(existing: ReadonlySet<number>, now: number): number {
  const today = utcDay(now);
  let n = 0;
  while (existing.has(today + (n + 1) * DAY_MS)) n++;
  return n;
}

/**
 * The receipt time an event is stored with: as the gateway stamped it, unless it is further ahead
 * of the trusted clock than the service's future bound (a gateway whose clock runs ahead), then
 * the trusted clock's now. Clamped rather than refused: the event was acknowledged.
 */
export function clampedReceipt(receivedAt: number, now: number): number {
  return isTooFarAhead(receivedAt, now) ? now : receivedAt;
}
