// The service's own events: written to the outbox by Identify, consumed by the journey engine,
// and reserved names that Track refuses. Their payloads are built here, as the journeys read them.
import { stringifyJson } from '../platform/json-text.ts';
export const SERVICE_EVENTS = {
  profileFieldsChanged: 'profile_fields_changed',
  subscriptionChanged: 'subscription_changed',
} as const;

/** Who a service event is about, and the call that caused it. */
export interface EventSubject {
  userId: string;
  profileId: string;
  messageId: string;
}

/**
 * A profile change's event, or null: only attribute-triggered journeys read a change, so an
 * organization without the feature gets none (it would be relayed and dropped; the worker checks
 * again when it runs, for a feature turned off meanwhile: journeys/engine.ts).
 */
export function profileFieldsChanged(
  attributeTrigger: boolean,
  subject: EventSubject,
  at: number,
  names: readonly string[],
  fields: Record<string, unknown>,
): string | null {
  if (!attributeTrigger || !names.length) return null;
  return stringifyJson({ ...subject, at, changed: Object.fromEntries(names.map((k) => [k, fields[k]])) });
}

/** What a subscription change reports of the decision (identify/consent.ts Decision). */
export interface SubscriptionDecision {
  channel: string;
  purpose: string;
  status: string;
  decidedAt: number;
  expiresAt: number | null;
}

export function subscriptionChanged(subject: EventSubject, decision: SubscriptionDecision, address: string): string {
  const { channel, purpose, status, decidedAt, expiresAt } = decision;
  return stringifyJson({ ...subject, channel, purpose, address, status, decidedAt, expiresAt });
}
