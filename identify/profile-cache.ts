// The profiles one gateway wrote last, with the row version each was written at (PostgreSQL's
// xmin: the id of the transaction that wrote the row). Identify's cached path
// (identify-batch.ts, writeCached in identify-write.ts) plans a batch from these instead of reading them, and writes on the
// condition that each row is still at that version. So an entry may be stale (another gateway
// or an operator changed the row since), never wrong: a stale one fails the write, and the
// batch takes the locked path, which reads what is stored and refreshes the entry.
// An xmin repeats only after 2^32 transactions; an entry is rewritten or evicted long before.
//
// A batch tries the cache only while most of its recent tries succeeded (cache-gate.ts): behind
// several gateways sharing users, most would be stale.
//
// The budget is in heap bytes (platform/heap-size.ts): a profile's strings, objects and boxed
// numbers, and each of its users' key and Map entry. A profile's users are evicted with it.
import { arrayBytes, asciiBytes, EMPTY_LITERAL_BYTES, MAP_ENTRY_BYTES, NUMBER_BYTES, objectBytes, stringBytes } from '../platform/heap-size.ts';
import { Lru } from '../platform/lru.ts';
import { CacheGate } from './cache-gate.ts';
import type { LatestClaims, Snapshot, StoredProfile } from './identify-plan.ts';
import { userRef, type IdentifyCall, type Plan } from './identify-plan.ts';

/** A snapshot built from the cache, and the version each of its profiles must still have. */
export interface CachedSnapshot {
  snapshot: Snapshot;
  versions: Map<string, string>;
}

interface Entry {
  profile: StoredProfile;
  version: string;
  /** The profile's own cost, and `bytes` that plus its users'. */
  profileBytes: number;
  bytes: number;
  /** The users (userRef) that map to this profile: each a key of `users`. */
  refs: readonly string[];
}

/** A profile costing more than this is not kept: it is rare, and it would push out hundreds of others. */
const LARGEST_BYTES = 128 * 1024;

const NO_REFS: readonly string[] = [];

/**
 * The fixed part of a cached profile: its Map entry, the Entry, its users' array (whose slots
 * userBytes counts), the planned profile (a StoredProfile and isNew) and its two times (boxed numbers).
 */
const PROFILE_FIXED_BYTES = MAP_ENTRY_BYTES + objectBytes(5) + arrayBytes(1) - 8 + objectBytes(10) + 2 * NUMBER_BYTES;

/** What one cached profile costs, without its users. */
function profileBytes(p: StoredProfile, version: string): number {
  const email = p.email === null ? 0 : stringBytes(p.email);
  // Ids are UUIDs and the version is digits; traits, their names and addresses may be any text.
  const texts = asciiBytes(p.id) + asciiBytes(p.envId) + asciiBytes(version) + stringBytes(p.fields) + stringBytes(p.times) + email;
  return PROFILE_FIXED_BYTES + texts + latestBytes(p.latest);
}

function latestBytes(latest: LatestClaims): number {
  let bytes = EMPTY_LITERAL_BYTES;
  for (const claim of Object.values(latest)) bytes += objectBytes(4) + 2 * NUMBER_BYTES + asciiBytes(claim.channel) + stringBytes(claim.value);
  return bytes;
}

/** What one user adds: its key and entry in `users`, and its slot in the profile's `refs`. */
const userBytes = (ref: string) => MAP_ENTRY_BYTES + stringBytes(ref) + 8;

export class ProfileCache {
  /** profile id → entry, least recently written first. */
  private readonly profiles: Lru<string, Entry>;
  /** userRef → the entry of its profile. */
  private readonly users = new Map<string, Entry>();
  /** Whether a batch tries the cached path, from how the recent tries went. */
  private readonly gate = new CacheGate();

  /** `maxBytes`: the heap the cached profiles and their users may take. */
  constructor(maxBytes: number) {
    this.profiles = new Lru(maxBytes, (_id, entry) => this.dropUsers(entry));
  }

  /**
   * The batch's snapshot when every call can be planned from the cache: each user's profile is
   * held, and no call needs what the cache does not keep (consent decisions and address history,
   * profiles a joinable email may join), and the gate lets the batch try. Null otherwise.
   */
  snapshotFor(calls: IdentifyCall[]): CachedSnapshot | null {
    const users = new Map<string, string>();
    const profiles = new Map<string, StoredProfile>();
    const versions = new Map<string, string>();
    for (const c of calls) {
      if (c.input.consent.length > 0 || c.joinEmail) return null;
      const ref = userRef(c);
      const entry = this.users.get(ref);
      if (!entry) return null;
      users.set(ref, entry.profile.id);
      profiles.set(entry.profile.id, entry.profile);
      versions.set(entry.profile.id, entry.version);
    }
    if (!this.gate.shouldTry()) return null;
    return { snapshot: { users, profiles, priors: new Map(), decisions: null }, versions };
  }

  /** A cached write's outcome: written at the cached versions, or fallen back to the locked path (a profile changed since, a messageId used before). */
  tried(succeeded: boolean): void {
    this.gate.record(succeeded);
  }

  /** What a committed batch wrote, at `version` (the writing transaction's id). */
  remember(plan: Plan, version: string): void {
    for (const m of plan.moved) this.forget(m.from);
    // The plan's own objects are kept: nothing changes them once planned.
    for (const profile of plan.profiles) {
      const bytes = profileBytes(profile, version);
      const held = this.profiles.peek(profile.id);
      if (bytes > LARGEST_BYTES) {
        if (held) this.forget(profile.id);
      } else if (held) {
        // Its users stay with it.
        held.profile = profile;
        held.version = version;
        this.profiles.resize(held, bytes - held.profileBytes);
        held.profileBytes = bytes;
        this.profiles.set(profile.id, held);
      } else {
        this.profiles.set(profile.id, { profile, version, profileBytes: bytes, bytes, refs: NO_REFS });
      }
    }
    for (const [ref, id] of plan.userProfiles) this.link(ref, this.profiles.peek(id));
    this.profiles.trim();
  }

  /** Drops a profile and its users (their calls then miss). */
  forget(id: string): void {
    const entry = this.profiles.delete(id);
    if (entry) this.dropUsers(entry);
  }

  /** Profiles held. */
  get size(): number {
    return this.profiles.size;
  }

  /** Heap bytes held, as counted against the budget. */
  get bytes(): number {
    return this.profiles.bytes;
  }

  /** Maps a user to `entry` (or to nothing), moving it from the profile it was with. */
  private link(ref: string, entry: Entry | undefined): void {
    const was = this.users.get(ref);
    if (was === entry) return;
    if (was) {
      was.refs = was.refs.filter((r) => r !== ref);
      this.profiles.resize(was, -userBytes(ref));
    }
    if (!entry) {
      this.users.delete(ref);
      return;
    }
    this.users.set(ref, entry);
    entry.refs = entry.refs.length === 0 ? [ref] : [...entry.refs, ref];
    this.profiles.resize(entry, userBytes(ref));
  }

  private dropUsers(entry: Entry): void {
    for (const ref of entry.refs) if (this.users.get(ref) === entry) this.users.delete(ref);
  }
}
