// Identifiers in Redis that need no BullMQ to compute: operator commands that read PostgreSQL
// or only publish on Redis use them without loading BullMQ (about 0.3 s of their start).
import { hash } from 'node:crypto';
import { toPgText } from './domain/pg-text.ts';
import type { Config } from './config.ts';

/**
 * BullMQ rejects custom ids containing ':' and messageIds are free text, so the id is a
 * hash. Only dead-letter jobs have one (a rare path); events are identified by the table's key.
 */
export function jobIdFor(environmentId: string, messageId: string): string {
  // The escaped form is well-formed UTF-16, so two IDs differing only in an unpaired surrogate do not collide.
  return 'e' + hash('sha256', `${environmentId}\0${toPgText(messageId)}`, 'base64url').slice(0, 32);
}

/** Redis channels on which operator commands tell every gateway to drop cached key lookups, and gateways confirm. */
export function authCacheChannels(config: Pick<Config, 'queuePrefix'>): { invalidate: string; ack: string } {
  return { invalidate: `${config.queuePrefix}:auth-cache:invalidate`, ack: `${config.queuePrefix}:auth-cache:ack` };
}
