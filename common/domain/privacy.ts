// The rules of the privacy operations (intake users …), pure. A person is named by the user
// ID's key, the SHA-256 of the trimmed ID as profile_users stores it (identity-hash.ts), so a
// tombstone, a suppression and an audit record hold no raw ID, and an operator who is given
// the ID again can find its records by hashing it.
import { hashStored, identityHash } from './identity-hash.ts';

/** The key of a user ID as a caller sent it (trimmed, as Identify stores it). */
export function userHashOf(userId: string): Buffer<ArrayBuffer> {
  return identityHash(userId.trim());
}

/** The key of a user ID already in its stored form (trimmed, pg-text escaped). */
export const userHashOfStored = (userKey: string): Buffer<ArrayBuffer> => hashStored(userKey);

/** identify_messages.user_key: the first 64 bits of the user's key, signed, as decimal text. */
export function userKeyBits(userHash: Buffer): string {
  return userHash.readBigInt64BE(0).toString();
}

/** What the operator decided about one user ID of an environment (privacy_users). */
export interface PrivacyState {
  /** The latest erasure (epoch ms), or null. */
  erasedAt: number | null;
  /** Since when calls are dropped (epoch ms), or null. */
  suppressedAt: number | null;
}

export type DropReason = 'erased' | 'suppressed';

/**
 * Whether a call received at `receivedAt` is dropped, and why. An erasure covers everything
 * received up to and including its time (it was accepted before the erasure and must not bring
 * the person back); a suppression covers everything received from its time on. A call received
 * after an erasure without a suppression is new data.
 */
export function dropReason(state: PrivacyState | undefined, receivedAt: number): DropReason | null {
  if (!state) return null;
  if (state.erasedAt !== null && receivedAt <= state.erasedAt) return 'erased';
  if (state.suppressedAt !== null && receivedAt >= state.suppressedAt) return 'suppressed';
  return null;
}

/**
 * The consent decisions an erasure removes: those of the erased profiles' addresses that no
 * other profile of the environment claimed. A decision is about an address; when someone
 * else also gave that address, it is their decision as well, and the proof of it stays.
 */
export function decisionsToRemove(
  erased: readonly { channel: string; value: string }[],
  claimedElsewhere: readonly { channel: string; value: string }[],
): { channel: string; value: string }[] {
  const key = (a: { channel: string; value: string }) => `${a.channel}\0${a.value}`;
  const kept = new Set(claimedElsewhere.map(key));
  const out = new Map<string, { channel: string; value: string }>();
  for (const a of erased) if (a.value !== '' && !kept.has(key(a))) out.set(key(a), { channel: a.channel, value: a.value });
  return [...out.values()];
}

/** Who ran an operation: `--by`, else the OS user; never empty. */
export function operatorName(by: string | undefined, osUser: string | undefined): string {
  const name = (by ?? osUser ?? '').trim();
  return name || 'unknown';
}
