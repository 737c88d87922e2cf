// Group commit (and group reads): items wait while `maxInFlight` batches are running; as soon
// as one finishes, or at the end of the event-loop turn when fewer are running, the waiting
// items (up to `maxBatch`) go to `run` together. Under load batches grow instead of queueing
// for connections, so the per-batch round trips are shared by more items. With `overlapMs`, a
// batch starts beside running ones only once the latest of them has run that long: a steady
// load then forms one large batch at a time instead of a large one and a few small ones, while
// a slow batch (a huge call, a stalled commit) holds the others up for no more than that.
// Items with the same `keyOf` never run in two batches at once and keep their order: a later
// one waits for the batch holding an earlier one. Each add() settles with its own entry of
// run's answer (a value, or an Error for that item alone); if run rejects, every item of that
// batch rejects. An item `alone` says is slow (a 4 MB Identify call, whose rules take seconds)
// runs in a batch of its own, so that no other item waits for it, and such batches hold at most
// all slots but one, so that the other items always have a batch running.

export interface GroupBatch<T, R> {
  add(item: T): Promise<R>;
}

export interface GroupBatchOptions {
  maxBatch: number;
  maxInFlight: number;
  /** A batch starts beside running ones only once the latest of them has run this long (default 0: at once). */
  overlapMs?: number;
  onBatch?: (size: number) => void;
}

export interface GroupBatchItems<T> {
  /** Items of one key never run in two batches at once, and run in the order they were added. */
  keyOf?: (item: T) => string;
  /** An item that runs in a batch of its own, in all slots but one at most. */
  alone?: (item: T) => boolean;
}

interface Waiting<T, R> {
  item: T;
  alone: boolean;
  resolve: (r: R) => void;
  reject: (err: unknown) => void;
}

export function createGroupBatch<T, R>(run: (items: T[]) => Promise<(R | Error)[]>, options: GroupBatchOptions & GroupBatchItems<T>): GroupBatch<T, R> {
  const { keyOf } = options;
  let waiting: Waiting<T, R>[] = [];
  let inFlight = 0;
  let aloneInFlight = 0;
  const maxAlone = Math.max(1, options.maxInFlight - 1);
  let scheduled = false;
  /** When each running batch started, and the timer that flushes once the latest is old enough. */
  const starts: number[] = [];
  let overlapTimer: NodeJS.Timeout | undefined;
  const overlapMs = options.overlapMs ?? 0;
  /** Keys of the items in running batches (a key is in one at most: take() leaves its items waiting). */
  const busy = new Set<string>();

  /**
   * Waiting items in order, up to maxBatch, leaving behind in order those whose key is busy and
   * every later item of that key; an item to run alone only as the first, and then by itself.
   */
  const take = (): Waiting<T, R>[] => {
    const batch: Waiting<T, R>[] = [];
    const rest: Waiting<T, R>[] = [];
    const held = new Set<string>();
    for (const w of waiting) {
      const key = keyOf?.(w.item);
      const room = w.alone ? batch.length === 0 && aloneInFlight < maxAlone : batch.length < options.maxBatch && !batch[0]?.alone;
      if (room && (key === undefined || (!busy.has(key) && !held.has(key)))) batch.push(w);
      else {
        rest.push(w);
        if (key !== undefined) held.add(key);
      }
    }
    waiting = rest;
    return batch;
  };

  const start = (batch: Waiting<T, R>[]) => {
    const keys = keyOf ? [...new Set(batch.map((w) => keyOf(w.item)))] : [];
    for (const k of keys) busy.add(k);
    inFlight++;
    const alone = batch[0].alone;
    if (alone) aloneInFlight++;
    const startedAt = performance.now();
    starts.push(startedAt);
    options.onBatch?.(batch.length);
    run(batch.map((w) => w.item))
      .then(
        (outcomes) => batch.forEach((w, i) => (outcomes[i] instanceof Error ? w.reject(outcomes[i]) : w.resolve(outcomes[i] as R))),
        (err: unknown) => batch.forEach((w) => w.reject(err)),
      )
      .finally(() => {
        for (const k of keys) busy.delete(k);
        inFlight--;
        if (alone) aloneInFlight--;
        starts.splice(starts.indexOf(startedAt), 1);
        flush();
      });
  };

  const flush = () => {
    scheduled = false;
    while (inFlight < options.maxInFlight && waiting.length) {
      const wait = inFlight > 0 ? Math.max(...starts) + overlapMs - performance.now() : 0;
      if (wait > 0) {
        overlapTimer ??= setTimeout(() => {
          overlapTimer = undefined;
          flush();
        }, wait);
        break;
      }
      const batch = take();
      // Every waiting item's key is in a running batch: the next to finish flushes again.
      if (!batch.length) break;
      start(batch);
    }
  };

  return {
    add(item) {
      return new Promise<R>((resolve, reject) => {
        waiting.push({ item, alone: options.alone?.(item) ?? false, resolve, reject });
        if (!scheduled && inFlight < options.maxInFlight) {
          scheduled = true;
          setImmediate(flush);
        }
      });
    },
  };
}
