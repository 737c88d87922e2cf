import { isPlainText } from '../platform/pg-text.ts';

// Joining by email only happens on something that looks like a real address: placeholders
// such as `unknown`, `N/A`, blanks or anything without a domain never join, and neither do
// shared no-reply mailboxes (joining on them would merge unrelated people).
const ADDRESS = /^[^\s@]+@[^\s@.]+(\.[^\s@.]+)+$/;
const PLACEHOLDER_LOCAL = new Set(['unknown', 'none', 'null', 'n/a', 'na', 'noemail', 'no-email', 'noreply', 'no-reply', 'donotreply']);

type JoinCandidate = { id: string; envId: string; email: string | null; createdAt: number };

/**
 * The profile a joinable email joins: the oldest of `profiles` (oldest created, then lowest id)
 * of the environment holding it, other than `own`.
 */
export function joinTarget<P extends JoinCandidate>(profiles: Iterable<P>, envId: string, email: string, own: string | null): P | null {
  let best: P | null = null;
  for (const p of profiles) {
    if (p.envId !== envId || p.email !== email || p.id === own) continue;
    if (!best || p.createdAt < best.createdAt || (p.createdAt === best.createdAt && p.id < best.id)) best = p;
  }
  return best;
}

/** The normalized address when `value` may join profiles, else null. */
export function joinableEmail(value: unknown): string | null {
  if (typeof value !== 'string' || !isPlainText(value)) return null;
  const address = value.trim().toLowerCase();
  if (!ADDRESS.test(address)) return null;
  return PLACEHOLDER_LOCAL.has(address.slice(0, address.lastIndexOf('@'))) ? null : address;
}
