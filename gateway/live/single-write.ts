// How the live view's recorders (recorder.ts, refused-recorder.ts) run their writes to Redis.
// Each write takes what was handed over until then.

export interface SingleWrite {
  /** A timer's write: at most one at a time (a Redis that hangs holds one, not one more every second); a failure is reported, not thrown. */
  tick(): Promise<void>;
  /**
   * Resolves once everything handed over before the call is written: the write in flight holds
   * the older calls, one more write the rest. Rejects when that write fails. An erasure waits
   * on this (flush-on-erasure.ts) before it removes the person's calls from Redis.
   */
  flush(): Promise<void>;
}

export function singleWrite(write: () => Promise<void>, warn: (err: unknown) => void): SingleWrite {
  let running: Promise<void> | undefined;
  const run = () => (running ??= write().finally(() => (running = undefined)));
  return {
    tick: () => run().catch(warn),
    async flush() {
      await running?.catch(() => {});
      await run();
    },
  };
}
