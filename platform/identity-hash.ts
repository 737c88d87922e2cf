// A caller's value that is part of a unique key or an index (a messageId, a userId, an
// address) can be of any length, and a btree entry cannot pass ~2.7 KB. So the key is a
// fixed-length digest of the value as stored (the escaped text of pg-text.ts); the full value
// stays in its own column and is compared on lookup. Two values share a key only through a
// SHA-256 collision.
import { hash } from 'node:crypto';
import { toPgText } from './pg-text.ts';

/** The 32-byte key of a value already in its stored (escaped) form. */
export function hashStored(stored: string): Buffer<ArrayBuffer> {
  return hash('sha256', stored, 'buffer') as Buffer<ArrayBuffer>;
}

/**
 * hashStored as hex, as the statements pass a key (decode(…, 'hex')). Hex rather than a Buffer:
 * a Buffer of its own is a native allocation, which cost twice the hash itself.
 */
export const storedHashHex = (stored: string): string => hash('sha256', stored, 'hex');

/** The first 64 bits of a hex digest, signed (an advisory lock's key). */
export const int64OfHex = (hex: string): bigint => BigInt.asIntN(64, BigInt(`0x${hex.slice(0, 16)}`));

/** int64OfHex as the decimal text of an int8 column. */
export const int8OfHex = (hex: string): string => int64OfHex(hex).toString();

/** The 32-byte key of a caller's value (escaped first, exactly as its column stores it). */
export function identityHash(value: string): Buffer<ArrayBuffer> {
  return hashStored(toPgText(value));
}
