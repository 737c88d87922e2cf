// Whether a batch tries Identify's cached path (one round trip, on the condition that no one
// changed its profiles since this gateway wrote them). Behind several gateways, or one gateway
// of GATEWAY_PROCESSES > 1, a user's calls land on different processes, each with its own
// cache: a profile another process wrote since is stale there, and one stale profile fails a
// cached batch as a whole (its round trip and an aborted statement are spent, then the batch
// takes the locked path). With users shared that way most cached batches fail, and the cache
// made two gateways slower than none (docs/performance.md). So a batch tries the cached path
// while most recent tries succeeded; once most failed, batches go straight to the locked path,
// and one in every PROBE_EVERY still tries, to notice when it would succeed again (the other
// gateways gone, users no longer shared): a probe that succeeds opens the gate.

/** How much one try's outcome moves the success rate (an exponentially weighted average). */
const WEIGHT = 0.2;
/** Below this success rate a failed try costs more than the successful ones save. */
const OPEN_AT = 0.5;
/** While closed, one batch in this many tries the cached path anyway. */
export const PROBE_EVERY = 16;

export class CacheGate {
  /** The recent tries' success rate; a new gate trusts its cache. */
  private rate = 1;
  private skipped = 0;

  /** Whether this batch tries the cached path. */
  shouldTry(): boolean {
    if (this.rate >= OPEN_AT) return true;
    if (++this.skipped < PROBE_EVERY) return false;
    this.skipped = 0;
    return true;
  }

  /** A try's outcome: written at the cached versions, or fallen back to the locked path. A success opens the gate. */
  record(succeeded: boolean): void {
    this.rate += WEIGHT * ((succeeded ? 1 : 0) - this.rate);
    if (succeeded) this.rate = Math.max(this.rate, OPEN_AT);
  }
}
