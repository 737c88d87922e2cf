import { randomInt } from 'node:crypto';

// Letters, digits, punctuation, a space and characters of two to four UTF-8 bytes: random text of
// this alphabet does not compress, so PostgreSQL cannot squeeze a long value under a btree limit.
const MIXED = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/@+ äöüßéñçøåæ€漢字かなカナ😀🚀'];

/** Random text of about `bytes` UTF-8 bytes (exactly `bytes` characters of the alphabet when it is ASCII). */
export function randomText(bytes: number, alphabet: string = MIXED.join('')): string {
  const chars = [...alphabet];
  let out = '';
  let size = 0;
  while (size < bytes) {
    const c = chars[randomInt(chars.length)];
    out += c;
    size += Buffer.byteLength(c);
  }
  return out;
}
