// The keys under which PostgreSQL keeps what holds no raw ID (prisma/schema.prisma): a Track
// messageId's record (event_ids) is its SHA-256, an Identify messageId's key the first 128 bits
// of it as a uuid, a user's key the first 64 bits (signed) of the SHA-256 of the trimmed user ID. The run's IDs hold no NUL
// character, so the stored form is the ID itself.
import { createHash } from 'node:crypto';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest();

export function messageKeyOf(messageId: string): string {
  const h = sha256(messageId).toString('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** event_ids.message_hash of a Track messageId, as hex. */
export function messageHashOf(messageId: string): string {
  return sha256(messageId).toString('hex');
}

export function userKeyOf(userId: string): string {
  return sha256(userId.trim()).readBigInt64BE(0).toString();
}
