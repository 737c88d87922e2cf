// What both of Identify's write paths (identify-batch.ts, identify-cached.ts) send for a batch:
// its messageId claims and the statement parts that insert address claims and outbox rows.
import { QUERY_TIMEOUT_MS } from '../db.ts';
import { hashStored } from '../domain/identity-hash.ts';
import { toPgText } from '../domain/pg-text.ts';
import { messageRef, type IdentifyCall, type Plan } from './identify-plan.ts';

export const hex = (text: string) => hashStored(text).toString('hex');

export interface MessageClaim {
  call: IdentifyCall;
  /** The messageId's key (messageKeyOf). */
  key: string;
}

/**
 * A messageId's key in identify_messages: the first 128 bits of its SHA-256, as a uuid. Two
 * messageIds of one environment share a key only through a 128-bit collision.
 */
export function messageKeyOf(messageKey: string): string {
  const h = hex(messageKey);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/**
 * One claim per messageId (its first call: later copies are weighed against it in memory), in
 * key order, so two transactions claiming the same messageIds wait for each other in one order.
 */
export function messageClaims(calls: IdentifyCall[]): { byMessage: Map<string, MessageClaim>; sorted: MessageClaim[] } {
  const byMessage = new Map<string, MessageClaim>();
  for (const c of calls) if (!byMessage.has(messageRef(c))) byMessage.set(messageRef(c), { call: c, key: messageKeyOf(c.messageKey) });
  const sorted = [...byMessage.values()].sort((x, y) => compare(x.call.envId + x.key, y.call.envId + y.key));
  return { byMessage, sorted };
}

/** The claims' three arrays: environment, key, call digest. */
export function claimValues(claims: MessageClaim[]): unknown[] {
  return [claims.map((m) => m.call.envId), claims.map((m) => m.key), claims.map((m) => m.call.input.callDigest)];
}

/**
 * Inserts the claims of the three arrays from $p on. `skip`: a messageId already claimed is
 * skipped (the locked path reads which); `fail`: it fails the statement with 23505 (the cached
 * path, which then falls back to the locked path), a plain insert, cheaper for PostgreSQL than
 * ON CONFLICT's speculative one (no second index probe, no confirmation record in the WAL).
 */
export const INSERT_CLAIMS = (p: number, taken: 'skip' | 'fail') => `
  INSERT INTO identify_messages (environment_id, message_key, call_digest)
  SELECT * FROM unnest($${p}::uuid[], $${p + 1}::uuid[], $${p + 2}::int8[])${taken === 'skip' ? '\n  ON CONFLICT DO NOTHING' : ''}`;

/** Address history rows (4 arrays from $p on) and outbox rows (3 arrays from $p + 4 on). */
export const INSERT_ADDRESS_CLAIMS_AND_OUTBOX = (p: number) => `
new_claims AS (
  INSERT INTO address_claims (profile_id, channel, value, at) SELECT * FROM unnest($${p}::uuid[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::int8[])),
outbox AS (
  INSERT INTO outbox_events (environment_id, kind, payload) SELECT * FROM unnest($${p + 4}::uuid[], $${p + 5}::text[], $${p + 6}::text[]))`;

export function addressClaimAndOutboxValues(plan: Plan): unknown[] {
  return [
    plan.claims.map((c) => c.profileId),
    plan.claims.map((c) => c.channel),
    plan.claims.map((c) => toPgText(c.value)),
    plan.claims.map((c) => String(c.at)),
    plan.outbox.map((o) => o.envId),
    plan.outbox.map((o) => o.kind),
    plan.outbox.map((o) => o.payload),
  ];
}

export const iso = (ms: number) => new Date(ms).toISOString();

/**
 * A large statement's bound, by the text it carries, on the server's side (SET LOCAL: this
 * transaction only; the client's is the pipeline's); an ordinary one keeps the pool's.
 */
export const largeStatementBound = (ms: number) => (ms > QUERY_TIMEOUT_MS ? `SET LOCAL statement_timeout = ${ms};` : '');

export const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

/** Characters of text a plan's write carries (its statement's time bound grows with them). */
export function carriedChars(plan: Plan): number {
  return sum(plan.profiles.map((p) => p.fields.length + p.times.length)) + sum(plan.outbox.map((o) => o.payload.length));
}

export function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
