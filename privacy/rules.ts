// The rules of the privacy operations (intake users …), pure. A tombstone and a suppression
// name the person by the user's key (the SHA-256 of the trimmed ID as profile_users stores it:
// profiles/person.ts), which every write path must match; an audit record, which outlives
// everything else, by a keyed hash of that key (auditUserHash), so that a candidate user ID
// alone cannot confirm it.
import { createHmac } from 'node:crypto';
import { int8OfHex } from '../platform/identity-hash.ts';

/**
 * The user hash an audit record and every `intake users` output carry: HMAC-SHA256 of the
 * user's key with the deployment's secret (deployment_secrets, made by a migration). An operator
 * with the command finds a person's records again; a reader of the records with a candidate ID
 * but without the secret cannot.
 */
export function auditUserHash(secret: Buffer, userHash: Buffer): Buffer {
  return createHmac('sha256', secret).update(userHash).digest();
}

/** identify_messages.user_key: the first 64 bits of the user's key (as hex), signed, as decimal text. */
export function userKeyBits(userHashHex: string): string {
  return int8OfHex(userHashHex);
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
 * The consent decisions an erasure removes: those of the erased profile's addresses that no
 * other profile of the environment holds now (its latest claim of that channel). A decision is
 * about an address; when someone else gives that address, it is their decision as well, and the
 * proof of it stays; an address another profile gave once and replaced is no longer theirs.
 */
export function decisionsToRemove(
  erased: readonly { channel: string; value: string }[],
  heldElsewhere: readonly { channel: string; value: string }[],
): { channel: string; value: string }[] {
  const key = (a: { channel: string; value: string }) => `${a.channel}\0${a.value}`;
  const kept = new Set(heldElsewhere.map(key));
  const out = new Map<string, { channel: string; value: string }>();
  for (const a of erased) if (a.value !== '' && !kept.has(key(a))) out.set(key(a), { channel: a.channel, value: a.value });
  return [...out.values()];
}

/** Who ran an operation: `--by`, else the OS user; never empty. */
export function operatorName(by: string | undefined, osUser: string | undefined): string {
  const name = (by ?? osUser ?? '').trim();
  return name || 'unknown';
}
