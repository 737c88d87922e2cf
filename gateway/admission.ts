// What a request may hold of one gateway process, and for whom. Two kinds of slot, each bounded
// per environment and in total:
// - an upload slot while its body is read, taken by a body not yet whole when the checks end:
//   for a moment by nearly every body, for longer by a slow or stalled upload (which
//   upload-watch.ts cuts when it is too slow);
// - an in-flight slot once its body is read (Profiles: once its key is checked) until it is
//   answered: while it is parsed, validated and waits on Redis or PostgreSQL.
// Both are taken after checks 2-5, when the environment is known, and shared max-min fairly:
// - an environment may take a slot while more are free than it already holds. k environments
//   that each take all they can therefore hold about 1/(k+1) of the total each, and about as
//   much again stays free for any environment holding less. Environments that arrive one after
//   another each take about half of what is left, and a dozen can use it up;
// - so when that refuses an upload and an environment holds at least two more uploads than the
//   one asking, an upload of the environment holding the most is taken back (answered 429 like
//   a refusal) and its slot given to the one asking. An upload has had nothing done with it yet
//   and its client retries, so taking it back is as harmless as refusing it; a request in
//   flight is being worked on and is never taken back.
// The per-environment parts still bound each environment. Each step is O(1): counters, a
// swap-remove array of uploads per environment, and environments kept in lists by the number of
// uploads they hold, so the largest holder is at hand.
// See docs/reliability.md, "Fairness between tenants", and docs/decisions.md, "Overload".
import type { IngestContext } from './checks/chain.ts';
import { tooManyRequests, type ApiError } from './errors.ts';

export interface AdmissionBounds {
  inFlight: number;
  inFlightPerEnvironment: number;
  uploads: number;
  uploadsPerEnvironment: number;
}

/**
 * Why a request was refused: the total was full (`in_flight`, `uploads`), or its environment held
 * its part or its fair share of what was free (`_environment`; an upload taken back counts here).
 */
export const REFUSAL_REASONS = ['in_flight', 'in_flight_environment', 'uploads', 'uploads_environment'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** One environment's slots; opaque outside this module. */
export interface EnvironmentSlots {
  readonly id: string;
}

/**
 * A body holding an upload slot. The caller makes one per upload and keeps it until endUpload;
 * the admission keeps its own bookkeeping on it, so taking and giving back allocate nothing.
 */
export interface UploadSlot {
  /** Set by the admission: whose slot it is while held (null once given or taken back), and its place among that environment's uploads. */
  holder: EnvironmentSlots | null;
  place: number;
  /** Stops the upload now, to be answered 429: its slot went to an environment holding fewer. Called at most once, by the admission. */
  reclaim(): void;
}

export interface Admission {
  /** A check step, after the body is read (Profiles: after check 5): takes an in-flight slot for the request, or refuses with 429. */
  takeInFlight(ctx: IngestContext): void;
  /** When the request's checks and answer have ended: gives back the slot it took, if it took one. */
  leaveInFlight(ctx: IngestContext): void;
  /** Gives `slot` an upload slot of the environment (perhaps taken back from another), or throws the 429 that closes the connection (the body is not read). */
  beginUpload(environmentId: string, slot: UploadSlot): void;
  /** Gives the slot back (nothing when it was taken back meanwhile). */
  endUpload(slot: UploadSlot): void;
  /** Forgets environments that hold nothing (run periodically: the map never grows past the environments recently active). */
  prune(): void;
  inFlightCount(): number;
  uploadCount(): number;
  refusals(reason: RefusalReason): number;
}

/** One environment's slots. Kept while in use and pruned later, so a steady caller allocates nothing per request. */
interface Held extends EnvironmentSlots {
  inFlight: number;
  /** Its uploads, in no order (swap-remove). */
  uploads: UploadSlot[];
  /** Its neighbours among the environments holding as many uploads (a doubly linked list per count). */
  prev: Held | null;
  next: Held | null;
}

// One instance each for every refusal: they carry nothing of the request, and refusing allocates nothing.
const busy = tooManyRequests();
const busyUploading = tooManyRequests(true);

/** Whether an environment holding `held` may take one more of `bound` slots when `taken` are taken: while more are free than it holds. */
export function fairToTake(held: number, taken: number, bound: number): boolean {
  return held < bound - taken;
}

export function createAdmission(bounds: AdmissionBounds): Admission {
  const byEnvironment = new Map<string, Held>();
  let inFlight = 0;
  let uploads = 0;
  // byUploads[n]: the first of the environments holding n uploads (n >= 1); most: the largest n held.
  const byUploads: (Held | null)[] = [null];
  let most = 0;
  const refused: Record<RefusalReason, number> = { in_flight: 0, in_flight_environment: 0, uploads: 0, uploads_environment: 0 };

  const heldBy = (environmentId: string): Held => {
    let held = byEnvironment.get(environmentId);
    if (!held) byEnvironment.set(environmentId, (held = { id: environmentId, inFlight: 0, uploads: [], prev: null, next: null }));
    return held;
  };
  const refuse = (reason: RefusalReason, error: ApiError): never => {
    refused[reason]++;
    throw error;
  };

  const unlink = (held: Held, count: number) => {
    if (held.prev) held.prev.next = held.next;
    else byUploads[count] = held.next;
    if (held.next) held.next.prev = held.prev;
    held.prev = held.next = null;
  };
  const link = (held: Held, count: number) => {
    if (count === byUploads.length) byUploads.push(null);
    const first = byUploads[count];
    held.next = first;
    if (first) first.prev = held;
    byUploads[count] = held;
  };
  const take = (held: Held, slot: UploadSlot) => {
    const count = held.uploads.length;
    if (count > 0) unlink(held, count);
    link(held, count + 1);
    if (count + 1 > most) most = count + 1;
    slot.holder = held;
    slot.place = count;
    held.uploads.push(slot);
    uploads++;
  };
  const give = (held: Held, slot: UploadSlot) => {
    const count = held.uploads.length;
    const last = held.uploads.pop()!;
    if (last !== slot) {
      held.uploads[slot.place] = last;
      last.place = slot.place;
    }
    slot.holder = null;
    slot.place = -1;
    unlink(held, count);
    if (count > 1) link(held, count - 1);
    // The environment moved one list down, so the largest count falls by at most one.
    if (count === most && byUploads[count] === null) most--;
    uploads--;
  };

  return {
    takeInFlight(ctx) {
      // The same object until it is released: pruning leaves an environment that holds a slot.
      const held = heldBy(ctx.state.environment.id);
      if (held.inFlight >= bounds.inFlightPerEnvironment) refuse('in_flight_environment', busy);
      if (!fairToTake(held.inFlight, inFlight, bounds.inFlight)) refuse(inFlight >= bounds.inFlight ? 'in_flight' : 'in_flight_environment', busy);
      held.inFlight++;
      inFlight++;
      ctx.state.inFlight = held;
    },
    leaveInFlight(ctx) {
      const held = ctx.state.inFlight;
      if (held === undefined) return;
      ctx.state.inFlight = undefined;
      (held as Held).inFlight--;
      inFlight--;
    },
    beginUpload(environmentId, slot) {
      const held = heldBy(environmentId);
      const count = held.uploads.length;
      if (count >= bounds.uploadsPerEnvironment) refuse('uploads_environment', busyUploading);
      if (fairToTake(count, uploads, bounds.uploads)) return take(held, slot);
      // Taken from the environment holding the most, when that leaves it still holding at least as many.
      if (most < count + 2) refuse(uploads >= bounds.uploads ? 'uploads' : 'uploads_environment', busyUploading);
      const largest = byUploads[most]!;
      const taken = largest.uploads[largest.uploads.length - 1];
      give(largest, taken);
      refused.uploads_environment++;
      take(held, slot);
      taken.reclaim();
    },
    endUpload(slot) {
      if (slot.holder) give(slot.holder as Held, slot);
    },
    prune() {
      for (const [id, held] of byEnvironment) if (held.inFlight === 0 && held.uploads.length === 0) byEnvironment.delete(id);
    },
    inFlightCount: () => inFlight,
    uploadCount: () => uploads,
    refusals: (reason) => refused[reason],
  };
}
