// A person as PostgreSQL knows them: the user key that names them, and the locks that protect
// what is stored of them. Identify's batches, the worker's store of Track events, the journey
// engine and an erasure all name people and take these locks through this module, in one
// order, so that none of them can wait on another in a cycle and an erasure cannot miss a
// row any of them writes:
//
//   1. the environment's lock (`environmentLock`): held shared while a worker stores events and
//      while the journey engine changes a person's runs; an erasure holds it exclusively, so it
//      needs no lock per user ID however many user IDs a joined person has;
//   2. user and joining-email locks, sorted (`sortedLocks`): Identify's batch takes one per user
//      and per email it may join on; an erasure takes the erased user ID's, so that user's
//      first profile cannot appear beside it;
//   3. profile rows, FOR UPDATE in id order: Identify locks every profile it reads or joins; an
//      erasure locks the person's profile, so no user ID joins it while it is erased;
//   4. consent locks (environment, channel, purpose, address), sorted: Identify's decisions, and
//      an erasure before it weighs which decisions of the person's addresses stay;
//   5. the journey lock of one user ID, after 1: the journey engine's work on that person.
//
// The user key is the user ID trimmed (the specification stores it so) in its stored text form
// (pg-text.ts); its SHA-256 keys profile_users, tombstones and journey runs.
import { hash } from 'node:crypto';
import { hashStored, int64OfHex } from '../platform/identity-hash.ts';
import { toPgText } from '../platform/pg-text.ts';

/** The stored key of a user ID as a caller sent it: trimmed, then escaped for PostgreSQL text. */
export function userKeyOf(userId: string): string {
  return toPgText(userId.trim());
}

/** The 32-byte key of a user (profile_users.user_hash, privacy_users, journey_runs) from its stored key. */
export const userHashOfKey = (userKey: string): Buffer<ArrayBuffer> => hashStored(userKey);

/** The 32-byte key of a user ID as a caller sent it (trimmed first). */
export const userHashOf = (userId: string): Buffer<ArrayBuffer> => userHashOfKey(userKeyOf(userId));

/**
 * The stored key of an event's userId when it differs from the userId as stored (a caller's
 * `" u-7 "`), else null: events keep the ID exactly as sent and find the person by this too.
 */
export function paddedUserKey(storedUserId: string | null): string | null {
  if (storedUserId === null) return null;
  const trimmed = storedUserId.trim();
  return trimmed === storedUserId ? null : trimmed;
}

/** A 64-bit advisory lock key (SHA-256 prefix, signed): every advisory lock on a person's data is one. */
function lockKey(text: string): bigint {
  return int64OfHex(hash('sha256', text, 'hex'));
}

/** 1. The environment's lock: shared by event stores and journey work, exclusive by an erasure. */
export const environmentLock = (environmentId: string): bigint => lockKey(`erasure:${environmentId}`);

/** 2. A user's lock (Identify's batches; an erasure of that user ID). */
export const userLock = (environmentId: string, userKey: string): bigint => lockKey(`user:${environmentId}:${userKey}`);

/** 2. A joinable email's lock (Identify's batches of an organization that joins by email). */
export const emailLock = (environmentId: string, email: string): bigint => lockKey(`email:${environmentId}:${email}`);

/** Every purpose a consent decision may have: an address has one consent lock per channel and purpose. */
export const CONSENT_PURPOSES = ['marketing', 'tracking'] as const;

/** 4. An address's consent lock, per channel and purpose. */
export const consentLock = (environmentId: string, channel: string, purpose: string, address: string): bigint =>
  lockKey(`consent:${environmentId}:${channel}:${purpose}:${toPgText(address)}`);

/** 4. Every consent lock of an address on a channel, one per purpose (an erasure weighs all its decisions). */
export const addressConsentLocks = (environmentId: string, channel: string, address: string): bigint[] =>
  CONSENT_PURPOSES.map((purpose) => consentLock(environmentId, channel, purpose, address));

/** 5. A user ID's journey lock. */
export const journeyLock = (environmentId: string, userKey: string): bigint => lockKey(`journey:${environmentId}:${userKey}`);

/** Lock keys of one kind, each once, in the order every transaction takes them. */
export function sortedLocks(keys: Iterable<bigint>): bigint[] {
  return [...new Set(keys)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Takes the transaction-scoped advisory locks of `$1` (an int8[] of sortedLocks) in that order. */
export const LOCK_SQL = 'SELECT pg_advisory_xact_lock(k) FROM unnest($1::int8[]) WITH ORDINALITY AS l(k, n) ORDER BY n';

/** Takes the environment locks of `$1` (sortedLocks of environmentLock) shared. */
export const LOCK_SHARED_SQL = 'SELECT pg_advisory_xact_lock_shared(k) FROM unnest($1::int8[]) WITH ORDINALITY AS l(k, n) ORDER BY n';

/** The int8[] parameter of LOCK_SQL and LOCK_SHARED_SQL. */
export const lockParam = (keys: readonly bigint[]): string[] => keys.map(String);
