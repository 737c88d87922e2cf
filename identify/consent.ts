// Consent resolution per address and channel/purpose (spec: "Consent resolution").
// Pure: the store loads the current decision and the address history, these rules decide.
import type { ConsentDecisionInput } from './validation.ts';
import { isTooFarAhead } from '../events/future-bound.ts';
import { DAY_MS } from '../events/partition-plan.ts';
import { fromPgText } from '../platform/pg-text.ts';

export type Channel = ConsentDecisionInput['channel'];
export type Purpose = ConsentDecisionInput['purpose'];
export type ConsentStatus = ConsentDecisionInput['status'];

export interface Decision {
  channel: Channel;
  purpose: Purpose;
  status: ConsentStatus;
  basis: string | null;
  source: string;
  proofRef: string | null;
  /** The decision's time: consentedAt, else the call's time. */
  decidedAt: number;
  expiresAt: number | null;
}

/**
 * The decision as it will be weighed. `callTime` is the call's `timestamp`, else its receipt
 * time; a `consentedAt` more than 5 minutes ahead of `now` is replaced by it.
 */
export function toDecision(input: ConsentDecisionInput, callTime: number, now: number): Decision {
  const decidedAt = input.consentedAt !== null && !isTooFarAhead(input.consentedAt, now) ? clampTime(input.consentedAt) : callTime;
  return {
    channel: input.channel,
    purpose: input.purpose,
    status: input.status,
    basis: input.basis,
    source: input.source,
    proofRef: input.proofRef,
    decidedAt,
    expiresAt: expiryOf(input.status, input.basis, decidedAt, input.expiresAt === null ? null : clampTime(input.expiresAt)),
  };
}

/** A consent_decisions row (its texts as stored, its int8 times as bigints or text) as a Decision. */
export function storedDecision(
  row: Record<'channel' | 'purpose' | 'status' | 'source', string> &
    Record<'basis' | 'proofRef', string | null> & { decidedAt: bigint | string; expiresAt: bigint | string | null },
): Decision {
  return {
    channel: row.channel as Channel,
    purpose: row.purpose as Purpose,
    status: row.status as ConsentStatus,
    basis: row.basis,
    source: fromPgText(row.source),
    proofRef: row.proofRef === null ? null : fromPgText(row.proofRef),
    decidedAt: Number(row.decidedAt),
    expiresAt: row.expiresAt === null ? null : Number(row.expiresAt),
  };
}

/** The spec asks only for integers; beyond the range of a date a time means "as far as time goes" (kept inside it, with room for the implied expiry months). */
export const MAX_TIME_MS = 8.6e15;
const clampTime = (ms: number) => Math.max(-MAX_TIME_MS, Math.min(MAX_TIME_MS, ms));

/** Implied consent lapses: 2 years (transaction), 6 months (inquiry), or an earlier expiresAt sent. */
export function expiryOf(status: ConsentStatus, basis: string | null, decidedAt: number, expiresAt: number | null): number | null {
  if (status !== 'granted') return expiresAt;
  const implied = basis === 'implied_transaction' ? addUtcMonths(decidedAt, 24) : basis === 'implied_inquiry' ? addUtcMonths(decidedAt, 6) : null;
  if (implied === null) return expiresAt;
  return expiresAt === null ? implied : Math.min(implied, expiresAt);
}

/** Calendar months in UTC; the day is clamped (Aug 31 + 6 months = Feb 28/29). */
export function addUtcMonths(ms: number, months: number): number {
  const d = new Date(ms);
  const day = d.getUTCDate();
  d.setUTCDate(1);
  d.setUTCMonth(d.getUTCMonth() + months);
  const lastDay = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 0)).getUTCDate();
  d.setUTCDate(Math.min(day, lastDay));
  return d.getTime();
}

// On equal times withdrawn beats granted, and any real decision beats unknown.
const TIE_RANK: Record<ConsentStatus, number> = { unknown: 0, granted: 1, withdrawn: 2 };

/**
 * Whether `incoming` replaces the stored decision for its address and channel/purpose.
 * `unknown` is the absence of a decision: it never replaces one, and any real decision
 * replaces it whatever their times (a stored unknown must not block an older grant).
 */
export function supersedes(incoming: Decision, existing: Decision | null): boolean {
  if (existing === null) return true;
  if (incoming.status === 'unknown') return false;
  if (existing.status === 'unknown') return true;
  if (incoming.decidedAt !== existing.decidedAt) return incoming.decidedAt > existing.decidedAt;
  return TIE_RANK[incoming.status] > TIE_RANK[existing.status];
}

/** Whether a stored decision's replacement changes the subscription (a `subscription_changed` service event). */
export function changesSubscription(incoming: Decision, existing: Decision | null): boolean {
  return !existing || existing.status !== incoming.status || existing.expiresAt !== incoming.expiresAt;
}

/** Granted and not lapsed: the only state in which a message may be sent. */
export function isGrantedAt(d: Decision | null, now: number): boolean {
  return d !== null && d.status === 'granted' && (d.expiresAt === null || d.expiresAt > now);
}

/** The address a decision applies to, from traits: email trimmed and lowercased, phone trimmed. */
export function addressFromTraits(channel: Channel, traits: { email?: unknown; phone?: unknown }): string | null {
  return normalizeAddress(channel, channel === 'email' ? traits.email : traits.phone);
}

export function normalizeAddress(channel: Channel, value: unknown): string | null {
  if (typeof value !== 'string') return null;
  const trimmed = value.trim();
  if (!trimmed) return null;
  return channel === 'email' ? trimmed.toLowerCase() : trimmed;
}

export interface AddressClaim {
  value: unknown;
  /** The call time that set it. */
  at: number;
}

/**
 * Whether a new claim of `value` at `at` adds nothing to an address history whose latest claim
 * (latest time, then latest arrival) is `latest`: from `at` on, addressAsOf finds `value` with
 * it or without it, and before `at` it is not considered. Such a claim is not stored.
 */
export function claimAddsNothing(latest: AddressClaim | undefined, value: string, at: number): boolean {
  return latest !== undefined && latest.at <= at && latest.value === value;
}

/** Of two claims of one history, the one addressAsOf would rather take (later time, then later arrival). */
export function laterClaim<C extends { at: number; order: number }>(a: C | undefined, b: C | undefined): C | undefined {
  if (!a || !b) return a ?? b;
  return b.at > a.at || (b.at === a.at && b.order > a.order) ? b : a;
}

/**
 * The address as of `time`: the claim with the latest time at or before it (on equal times
 * the later arrival, i.e. the later entry). Claims are in arrival order. `from`: the earliest
 * time the kept history answers for (addressHistoryFrom); a time before it finds no address,
 * whether or not the claims it would have read were removed yet.
 */
export function addressAsOf(channel: Channel, claims: AddressClaim[], time: number, from: number | null = null): string | null {
  if (from !== null && time < from) return null;
  let best: AddressClaim | null = null;
  for (const c of claims) if (c.at <= time && (best === null || c.at >= best.at)) best = c;
  return best === null ? null : normalizeAddress(channel, best.value);
}

/** The earliest decision time the address history answers for with ADDRESS_HISTORY_DAYS `days` (null: forever, any time). */
export function addressHistoryFrom(now: number, days: number | null): number | null {
  return days === null ? null : now - days * DAY_MS;
}
