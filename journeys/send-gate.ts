// Whether a journey's `send` step may record a message: the profile must have the channel's
// address and that address's marketing consent must resolve to granted and unexpired. Pure.
import { addressFromTraits, isGrantedAt, type Decision } from '../identify/consent.ts';
import type { SendChannel } from './journey-definition.ts';

export type SkipReason = 'no_profile' | 'no_address' | 'no_consent' | 'consent_unknown' | 'consent_withdrawn' | 'consent_expired';

export type SendVerdict = { status: 'queued'; address: string } | { status: 'skipped'; address: string | null; reason: SkipReason };

/** The address a send would go to (`traits.email` / `traits.phone`), normalized as consent is keyed. */
export function sendAddress(channel: SendChannel, fields: Record<string, unknown> | null): string | null {
  return fields === null ? null : addressFromTraits(channel, fields);
}

export function gateSend(fields: Record<string, unknown> | null, address: string | null, marketing: Decision | null, now: number): SendVerdict {
  if (fields === null) return { status: 'skipped', address: null, reason: 'no_profile' };
  if (address === null) return { status: 'skipped', address: null, reason: 'no_address' };
  if (isGrantedAt(marketing, now)) return { status: 'queued', address };
  const reason: SkipReason =
    marketing === null
      ? 'no_consent'
      : marketing.status === 'withdrawn'
        ? 'consent_withdrawn'
        : marketing.status === 'unknown'
          ? 'consent_unknown'
          : 'consent_expired';
  return { status: 'skipped', address, reason };
}
