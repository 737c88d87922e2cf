// Group commit (and group reads): items wait while `maxInFlight` batches are running; as soon
// as one finishes, or at the end of the event-loop turn when fewer are running, the waiting
// items (up to `maxBatch`) go to `run` together. Under load batches grow instead of queueing
// for connections, so the per-batch round trips are shared by more items. Each add() settles
// with its own entry of run's answer (a value, or an Error for that item alone); if run
// rejects, every item of that batch rejects.

export interface GroupBatch<T, R> {
  add(item: T): Promise<R>;
}

export interface GroupBatchOptions {
  maxBatch: number;
  maxInFlight: number;
  onBatch?: (size: number) => void;
}

export function createGroupBatch<T, R>(run: (items: T[]) => Promise<(R | Error)[]>, options: GroupBatchOptions): GroupBatch<T, R> {
  let waiting: { item: T; resolve: (r: R) => void; reject: (err: unknown) => void }[] = [];
  let inFlight = 0;
  let scheduled = false;

  const flush = () => {
    scheduled = false;
    while (inFlight < options.maxInFlight && waiting.length) {
      const batch = waiting.slice(0, options.maxBatch);
      waiting = waiting.slice(batch.length);
      inFlight++;
      options.onBatch?.(batch.length);
      run(batch.map((w) => w.item))
        .then(
          (outcomes) => batch.forEach((w, i) => (outcomes[i] instanceof Error ? w.reject(outcomes[i]) : w.resolve(outcomes[i] as R))),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          inFlight--;
          flush();
        });
    }
  };

  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, resolve, reject });
        if (!scheduled && inFlight < options.maxInFlight) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}
