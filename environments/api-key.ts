// API keys: generation, hashing for storage, and reading them from request headers.
import { hash, randomBytes } from 'node:crypto';

export const KEY_PREFIX = 'itk_';

const KEY_BODY_LENGTH = 40;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
// Largest multiple of 62 that fits in a byte: bytes at or above it are dropped
// so that `byte % 62` is uniform (plain modulo would favour the first 8 chars).
const UNBIASED_LIMIT = 256 - (256 % ALPHABET.length);

export function generateApiKey(): string {
  let body = '';
  while (body.length < KEY_BODY_LENGTH) {
    // About 3% of bytes are rejected, so one extra batch is rarely needed.
    for (const byte of randomBytes(KEY_BODY_LENGTH + 8)) {
      if (byte >= UNBIASED_LIMIT) continue;
      body += ALPHABET[byte % ALPHABET.length];
      if (body.length === KEY_BODY_LENGTH) break;
    }
  }
  return KEY_PREFIX + body;
}

// Only the hash is stored; keys are random enough that no salt is needed.
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

// Shown in key management in place of the key.
export function keySuffix(key: string): string {
  return key.slice(-5);
}

// Scheme, then the rest of the value (which may be empty).
const AUTHORIZATION_RE = /^(\S+)(?:\s+([\s\S]*))?$/;

export function extractApiKey(headers: { 'x-api-key'?: string | string[]; authorization?: string }): string | null {
  const header = headers['x-api-key'];
  // Node joins repeated headers the same way; the result is not a valid key.
  const fromHeader = (Array.isArray(header) ? header.join(', ') : (header ?? '')).trim();
  // A non-blank X-Api-Key is the only key checked, even if Authorization holds another.
  if (fromHeader !== '') return fromHeader;
  return fromAuthorization(headers.authorization);
}

function fromAuthorization(value: string | undefined): string | null {
  if (value === undefined) return null;
  const m = AUTHORIZATION_RE.exec(value.trim());
  if (m === null) return null;
  const scheme = m[1].toLowerCase();
  const token = (m[2] ?? '').trim();
  if (token === '') return null;
  if (scheme === 'bearer') return token;
  if (scheme === 'basic') {
    // Key as username, password ignored. Malformed base64 decodes to garbage, or to
    // nothing at all: either way a credential was sent, so it fails as an invalid (not
    // missing) key. Only an explicitly empty username (`:`) is no key.
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    if (decoded === '') return token;
    const colon = decoded.indexOf(':');
    const username = colon === -1 ? decoded : decoded.slice(0, colon);
    return username === '' ? null : username;
  }
  return null;
}
