// How long a request body may take to arrive. A body that did not come with its headers holds
// an upload slot of its environment while it is read (gateway/admission.ts), so a client that
// stalls or trickles must lose the slot in seconds rather than at the 30 s request timeout.
// A fixed deadline alone would cut a large body on a merely slow link; a rate alone would let
// a stalled body of a few bytes wait forever. Together: a grace period, plus time in
// proportion to what has arrived.

export interface UploadPace {
  /** What every body gets, from when the gateway starts reading it. */
  graceMs: number;
  /** Each further second is earned by this many bytes received. */
  minBytesPerSecond: number;
}

/** The time a body that has `received` bytes so far may have taken. */
export function allowedUploadMs(received: number, pace: UploadPace): number {
  return pace.graceMs + (received * 1000) / pace.minBytesPerSecond;
}

/** True when a body read for `elapsedMs` with `received` bytes so far is too slow and is to be cut. */
export function uploadOverdue(elapsedMs: number, received: number, pace: UploadPace): boolean {
  return elapsedMs > allowedUploadMs(received, pace);
}
