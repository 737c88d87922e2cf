// What a request may hold of one gateway process, and for whom. Two kinds of slot, each bounded
// per environment and in total:
// - an upload slot while its body is read, taken by a body not yet whole when the checks end:
//   for a moment by nearly every body, for longer by a slow or stalled upload (which
//   upload-watch.ts cuts when it is too slow);
// - an in-flight slot once its body is read (Profiles: once its key is checked) until it is
//   answered: while it is parsed, validated and waits on Redis or PostgreSQL.
// Both are taken after checks 2-5, when the environment is known. An environment that fills
// its part gets 429 alone; the totals are the process's own protection, which one environment
// cannot fill (its part is well under them). See docs/reliability.md, "Fairness between tenants".
import type { Middleware } from 'koa';
import { tooManyRequests, type ApiError } from './errors.ts';
import type { IngestState } from './state.ts';

export interface AdmissionBounds {
  inFlight: number;
  inFlightPerEnvironment: number;
  uploads: number;
  uploadsPerEnvironment: number;
}

/** Why a request was refused: which bound was full (`_environment`: its environment's part). */
export const REFUSAL_REASONS = ['in_flight', 'in_flight_environment', 'uploads', 'uploads_environment'] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface Admission {
  /** After the body is read (Profiles: after check 5): holds an in-flight slot while the rest of the chain runs, or refuses with 429. */
  inFlight: Middleware<IngestState>;
  /** Takes an upload slot of the environment, or throws the 429 that closes the connection (the body is not read). */
  beginUpload(environmentId: string): void;
  endUpload(environmentId: string): void;
  /** Forgets environments that hold nothing (run periodically: the map never grows past the environments recently active). */
  prune(): void;
  inFlightCount(): number;
  uploadCount(): number;
  refusals(reason: RefusalReason): number;
}

/** One environment's slots. Kept while in use and pruned later, so a steady caller allocates nothing per request. */
interface Held {
  inFlight: number;
  uploads: number;
}

// One instance each for every refusal: they carry nothing of the request, and refusing allocates nothing.
const busy = tooManyRequests();
const busyUploading = tooManyRequests(true);

export function createAdmission(bounds: AdmissionBounds): Admission {
  const byEnvironment = new Map<string, Held>();
  let inFlight = 0;
  let uploads = 0;
  const refused: Record<RefusalReason, number> = { in_flight: 0, in_flight_environment: 0, uploads: 0, uploads_environment: 0 };

  const heldBy = (environmentId: string): Held => {
    let held = byEnvironment.get(environmentId);
    if (!held) byEnvironment.set(environmentId, (held = { inFlight: 0, uploads: 0 }));
    return held;
  };
  const refuse = (reason: RefusalReason, error: ApiError): never => {
    refused[reason]++;
    throw error;
  };

  return {
    inFlight: async function inFlightSlot(ctx, next) {
      // The same object until it is released: pruning leaves an environment that holds a slot.
      const held = heldBy(ctx.state.environment.id);
      if (held.inFlight >= bounds.inFlightPerEnvironment) refuse('in_flight_environment', busy);
      if (inFlight >= bounds.inFlight) refuse('in_flight', busy);
      held.inFlight++;
      inFlight++;
      try {
        await next();
      } finally {
        held.inFlight--;
        inFlight--;
      }
    },
    beginUpload(environmentId) {
      const held = heldBy(environmentId);
      if (held.uploads >= bounds.uploadsPerEnvironment) refuse('uploads_environment', busyUploading);
      if (uploads >= bounds.uploads) refuse('uploads', busyUploading);
      held.uploads++;
      uploads++;
    },
    endUpload(environmentId) {
      heldBy(environmentId).uploads--;
      uploads--;
    },
    prune() {
      for (const [id, held] of byEnvironment) if (held.inFlight === 0 && held.uploads === 0) byEnvironment.delete(id);
    },
    inFlightCount: () => inFlight,
    uploadCount: () => uploads,
    refusals: (reason) => refused[reason],
  };
}
