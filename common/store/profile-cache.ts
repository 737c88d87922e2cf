// The profiles one gateway wrote last, with the row version each was written at (PostgreSQL's
// xmin: the id of the transaction that wrote the row). Identify's cached path
// (identify-cached.ts) plans a batch from these instead of reading them, and writes on the
// condition that each row is still at that version. So an entry may be stale (another gateway
// or an operator changed the row since), never wrong: a stale one fails the write, and the
// batch takes the locked path, which reads what is stored and refreshes the entry.
// An xmin repeats only after 2^32 transactions; an entry is rewritten or evicted long before.
import type { Snapshot, StoredProfile } from './identify-plan.ts';
import { userRef, type IdentifyCall, type Plan } from './identify-plan.ts';

/** A snapshot built from the cache, and the version each of its profiles must still have. */
export interface CachedSnapshot {
  snapshot: Snapshot;
  versions: Map<string, string>;
}

interface Entry {
  profile: StoredProfile;
  version: string;
  chars: number;
}

/** A profile larger than this is not kept: it is rare, and it would push out hundreds of others. */
const LARGEST_CHARS = 64 * 1024;

export class ProfileCache {
  /** profile id → entry, least recently written first. */
  private readonly profiles = new Map<string, Entry>();
  /** userRef → profile id. */
  private readonly users = new Map<string, string>();
  private chars = 0;

  /** `maxChars`: the characters of cached profile texts kept at most. */
  constructor(private readonly maxChars: number) {}

  /**
   * The batch's snapshot when every call can be planned from the cache: each user's profile is
   * held, and no call needs what the cache does not keep (consent decisions and address history,
   * profiles a joinable email may join). Null otherwise.
   */
  snapshotFor(calls: IdentifyCall[]): CachedSnapshot | null {
    const users = new Map<string, string>();
    const profiles = new Map<string, StoredProfile>();
    const versions = new Map<string, string>();
    for (const c of calls) {
      if (c.input.consent.length > 0 || (c.joinByEmail && c.joinEmail)) return null;
      const ref = userRef(c);
      const id = this.users.get(ref);
      const entry = id === undefined ? undefined : this.profiles.get(id);
      if (!entry) return null;
      users.set(ref, entry.profile.id);
      profiles.set(entry.profile.id, entry.profile);
      versions.set(entry.profile.id, entry.version);
    }
    return { snapshot: { users, profiles, priors: new Map(), decisions: null }, versions };
  }

  /** What a committed batch wrote, at `version` (the writing transaction's id). */
  remember(plan: Plan, version: string): void {
    for (const m of plan.moved) this.forget(m.from);
    for (const p of plan.profiles) {
      const chars = p.fields.length + p.times.length;
      this.forget(p.id);
      if (chars > LARGEST_CHARS) continue;
      // Field by field: object rest was most of this method's time.
      const profile: StoredProfile = {
        id: p.id,
        envId: p.envId,
        fields: p.fields,
        times: p.times,
        updatedAt: p.updatedAt,
        email: p.email,
        createdAt: p.createdAt,
        claims: null,
        latest: p.latest,
      };
      this.profiles.set(p.id, { profile, version, chars });
      this.chars += chars;
    }
    for (const [ref, id] of plan.userProfiles) {
      if (this.profiles.has(id)) this.users.set(ref, id);
      else this.users.delete(ref);
    }
    this.evict();
  }

  /** Drops a profile (its users' entries then miss). */
  forget(id: string): void {
    const entry = this.profiles.get(id);
    if (!entry) return;
    this.profiles.delete(id);
    this.chars -= entry.chars;
  }

  get size(): number {
    return this.profiles.size;
  }

  private evict(): void {
    for (const [id] of this.profiles) {
      if (this.chars <= this.maxChars) break;
      this.forget(id);
    }
    // A user whose profile was evicted or joined away is dropped once there are more users than profiles to go with them.
    if (this.users.size > 2 * this.profiles.size + 1024) {
      for (const [ref, id] of this.users) if (!this.profiles.has(id)) this.users.delete(ref);
    }
  }
}
