// What the storage maintenance removes of the address history (ADDRESS_HISTORY_DAYS): claims no
// decision Identify may still weigh reads (consent.ts addressAsOf, addressHistoryFrom).
import { addressHistoryFrom, laterClaim, type Channel } from './consent.ts';

/**
 * How far behind the gateways' bound the worker removes: a gateway whose clock is behind the
 * worker's, or a batch that read its history just before, still finds every claim it reads.
 */
export const HISTORY_REMOVAL_MARGIN_MS = 3_600_000;

/** The horizon the storage maintenance removes claims by (null: it removes none). */
export function historyRemovalHorizon(now: number, days: number | null): number | null {
  const from = addressHistoryFrom(now, days);
  return from === null ? null : from - HISTORY_REMOVAL_MARGIN_MS;
}

/**
 * The claims of a profile's history no decision at or after `horizon` reads: per channel, every
 * claim at or before it except the one addressAsOf picks at the horizon (latest time, then
 * latest arrival). For any time from the horizon on, that one answers instead of them.
 * storage.ts's removal is this rule in SQL (ordered by at, id).
 */
export function removableClaims<C extends { channel: Channel; at: number; order: number }>(claims: readonly C[], horizon: number): C[] {
  const kept = new Map<Channel, C>();
  for (const c of claims) if (c.at <= horizon) kept.set(c.channel, laterClaim(kept.get(c.channel), c)!);
  return claims.filter((c) => c.at <= horizon && kept.get(c.channel) !== c);
}
