// What both of Identify's write paths (identify-batch.ts, identify-cached.ts) send for a batch:
// its messageId claims and the statement parts that insert address claims and outbox rows.
import { QUERY_TIMEOUT_MS } from '../db.ts';
import { hashStored } from '../domain/identity-hash.ts';
import { toPgText } from '../domain/pg-text.ts';
import { messageRef, type IdentifyCall, type Plan } from './identify-plan.ts';

export const hex = (text: string) => hashStored(text).toString('hex');

export interface MessageClaim {
  call: IdentifyCall;
  /** The messageId's digest, hex. */
  hash: string;
}

/**
 * One claim per messageId (its first call: later copies are weighed against it in memory), in
 * key order, so two transactions claiming the same messageIds wait for each other in one order.
 */
export function messageClaims(calls: IdentifyCall[]): { byMessage: Map<string, MessageClaim>; sorted: MessageClaim[] } {
  const byMessage = new Map<string, MessageClaim>();
  for (const c of calls) if (!byMessage.has(messageRef(c))) byMessage.set(messageRef(c), { call: c, hash: hex(c.messageKey) });
  const sorted = [...byMessage.values()].sort((x, y) => compare(x.call.envId + x.hash, y.call.envId + y.hash));
  return { byMessage, sorted };
}

/** The claims' six arrays: environment, digest, messageId, userId, timestamp, traits. */
export function claimValues(claims: MessageClaim[]): unknown[] {
  return [
    claims.map((m) => m.call.envId),
    claims.map((m) => m.hash),
    claims.map((m) => m.call.messageKey),
    claims.map((m) => m.call.userKey),
    claims.map((m) => m.call.input.timestampMs),
    claims.map((m) => m.call.traitsText),
  ];
}

/**
 * Inserts the claims of the six arrays from $p on. `skip`: a messageId already claimed is
 * skipped (the locked path reads which); `fail`: it fails the statement with 23505 (the cached
 * path, which then falls back to the locked path), a plain insert, cheaper for PostgreSQL than
 * ON CONFLICT's speculative one (no second index probe, no confirmation record in the WAL).
 */
export const INSERT_CLAIMS = (p: number, taken: 'skip' | 'fail') => `
  INSERT INTO identify_messages (environment_id, message_id, message_hash, user_id, timestamp_ms, traits)
  SELECT env, id, decode(hash, 'hex'), user_id, ts, traits
  FROM unnest($${p}::uuid[], $${p + 1}::text[], $${p + 2}::text[], $${p + 3}::text[], $${p + 4}::int8[], $${p + 5}::text[]) AS m(env, hash, id, user_id, ts, traits)${taken === 'skip' ? '\n  ON CONFLICT DO NOTHING' : ''}`;

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
