// Collects items that arrive close together and hands them to `flush` as one batch: when
// `maxBatch` items are waiting, when the next item would take the batch's weight past
// `maxWeight` (a batch always takes at least one item), or `waitMs` after the first (0: at the
// end of the current event-loop turn). Each add() settles with its own batch's outcome, or with
// its own entry when `flush` returns one outcome per item (null = done). Batches may overlap.

export interface MicroBatch<T> {
  add(item: T): Promise<void>;
}

export interface MicroBatchOptions<T> {
  maxBatch: number;
  waitMs: number;
  /** An item's weight (bytes, rows) and the most one batch carries; unbounded when absent. */
  weight?: (item: T) => number;
  maxWeight?: number;
}

export function createMicroBatch<T>(flush: (items: T[]) => Promise<void | (Error | null)[]>, options: MicroBatchOptions<T>): MicroBatch<T> {
  const { weight, maxWeight = Infinity } = options;
  let items: T[] = [];
  let settlers: { resolve: () => void; reject: (err: unknown) => void }[] = [];
  let carried = 0;
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
    carried = 0;
    if (!batch.length) return;
    flush(batch).then(
      (outcomes) => waiting.forEach((s, i) => (outcomes?.[i] ? s.reject(outcomes[i]) : s.resolve())),
      (err) => waiting.forEach((s) => s.reject(err)),
    );
  };

  return {
    add(item) {
      return new Promise<void>((resolve, reject) => {
        const w = weight ? weight(item) : 0;
        if (items.length && carried + w > maxWeight) run();
        items.push(item);
        settlers.push({ resolve, reject });
        carried += w;
        if (items.length >= options.maxBatch || carried >= maxWeight) run();
        else if (timer === null) timer = options.waitMs > 0 ? setTimeout(run, options.waitMs) : setImmediate(run);
      });
    },
  };
}
