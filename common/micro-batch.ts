// Collects items that arrive close together and hands them to `flush` as one batch: when
// `maxBatch` items are waiting, or `waitMs` after the first (0: at the end of the current
// event-loop turn). Each add() settles with its own batch's outcome, or with its own entry
// when `flush` returns one outcome per item (null = stored). Batches may overlap.

export interface MicroBatch<T> {
  add(item: T): Promise<void>;
}

export function createMicroBatch<T>(flush: (items: T[]) => Promise<void | (Error | null)[]>, options: { maxBatch: number; waitMs: number }): MicroBatch<T> {
  let items: T[] = [];
  let settlers: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  let timer: NodeJS.Timeout | NodeJS.Immediate | null = null;

  const run = () => {
    if (timer !== null) {
      if (options.waitMs > 0) clearTimeout(timer as NodeJS.Timeout);
      else clearImmediate(timer as NodeJS.Immediate);
      timer = null;
    }
    const batch = items;
    const waiting = settlers;
    items = [];
    settlers = [];
    if (!batch.length) return;
    flush(batch).then(
      (outcomes) => waiting.forEach((s, i) => (outcomes?.[i] ? s.reject(outcomes[i]) : s.resolve())),
      (err) => waiting.forEach((s) => s.reject(err)),
    );
  };

  return {
    add(item) {
      return new Promise<void>((resolve, reject) => {
        items.push(item);
        settlers.push({ resolve, reject });
        if (items.length >= options.maxBatch) run();
        else if (timer === null) timer = options.waitMs > 0 ? setTimeout(run, options.waitMs) : setImmediate(run);
      });
    },
  };
}
