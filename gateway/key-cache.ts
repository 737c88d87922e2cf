// The memory of the gateway's API-key lookups (auth-cache.ts decides when to trust it): what
// PostgreSQL answered for a key's hash, and when. Keys that let a request in (active) and
// those that do not (unknown, revoked) are kept apart, each least recently used first within
// its own share of KEY_CACHE_MB: random keys sent by anyone can push out only other such
// keys, never a customer's valid one.
import { arrayBytes, asciiBytes, MAP_ENTRY_BYTES, NUMBER_BYTES, objectBytes, stringBytes } from '../platform/heap-size.ts';
import { Lru } from '../platform/lru.ts';
import type { KeyRecord } from '../environments/environment-store.ts';

export interface KeyEntry {
  record: KeyRecord | null;
  /** When PostgreSQL gave this answer (ms). */
  verifiedAt: number;
  bytes: number;
}

/** The share of the budget that keys which let no request in may take. */
export const REFUSED_SHARE = 0.25;

/** What an entry costs: the hash (its key), the entry, the record and its environment. */
export function keyEntryBytes(hash: string, record: KeyRecord | null): number {
  // The hash is hex, the id a UUID; the rest is what operators typed.
  let bytes = MAP_ENTRY_BYTES + asciiBytes(hash) + objectBytes(3) + NUMBER_BYTES;
  if (record === null) return bytes;
  const e = record.environment;
  bytes += objectBytes(2) + stringBytes(record.status) + objectBytes(7);
  bytes += asciiBytes(e.id) + stringBytes(e.organizationSlug) + stringBytes(e.pathValue) + stringBytes(e.environmentKey);
  bytes += arrayBytes(e.features.length);
  for (const f of e.features) bytes += stringBytes(f);
  return bytes;
}

const admits = (record: KeyRecord | null) => record !== null && record.status === 'active';

export class KeyCache {
  private readonly admitted: Lru<string, KeyEntry>;
  private readonly refused: Lru<string, KeyEntry>;

  constructor(maxBytes: number) {
    const refusedBytes = Math.floor(maxBytes * REFUSED_SHARE);
    this.admitted = new Lru(maxBytes - refusedBytes);
    this.refused = new Lru(refusedBytes);
  }

  /** The entry for a hash, now the most recently used of its kind. */
  get(hash: string): KeyEntry | undefined {
    return this.admitted.get(hash) ?? this.refused.get(hash);
  }

  /** Records PostgreSQL's answer for a hash (replacing what was there, of either kind). */
  put(hash: string, record: KeyRecord | null, verifiedAt: number): void {
    const [own, other] = admits(record) ? [this.admitted, this.refused] : [this.refused, this.admitted];
    other.delete(hash);
    own.set(hash, { record, verifiedAt, bytes: keyEntryBytes(hash, record) });
    own.trim();
  }

  clear(): void {
    this.admitted.clear();
    this.refused.clear();
  }

  /** Entries and bytes of each kind. */
  stats(): { admitted: { size: number; bytes: number }; refused: { size: number; bytes: number } } {
    const of = (l: Lru<string, KeyEntry>) => ({ size: l.size, bytes: l.bytes });
    return { admitted: of(this.admitted), refused: of(this.refused) };
  }
}
