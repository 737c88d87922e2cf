// One read for every viewer of the same page: a live page reloads every few seconds in each tab
// that shows it, and six tabs of one environment's events would otherwise read six times what
// one shows. A read is kept, under its page, environment and filter, for `ttlMs` from when it
// started; whoever asks meanwhile gets that read, finished or still under way. A failed read is
// not kept.

export interface SharedReads {
  get<T>(key: string, read: () => Promise<T>): Promise<T>;
  /** Drops a kept read (after a change its page must show at once). */
  forget(key: string): void;
}

export function createSharedReads(options: { ttlMs: number; maxKeys: number; now?: () => number }): SharedReads {
  const now = options.now ?? Date.now;
  const reads = new Map<string, { at: number; result: Promise<unknown> }>();
  return {
    get<T>(key: string, read: () => Promise<T>): Promise<T> {
      const t = now();
      const held = reads.get(key);
      if (held && t - held.at < options.ttlMs) return held.result as Promise<T>;
      reads.delete(key);
      // Expired reads go first, then the oldest: the map stays within maxKeys whatever is asked.
      for (const [k, r] of reads) {
        if (reads.size < options.maxKeys && t - r.at < options.ttlMs) break;
        reads.delete(k);
      }
      const result = read();
      reads.set(key, { at: t, result });
      result.catch(() => {
        if (reads.get(key)?.result === result) reads.delete(key);
      });
      return result;
    },
    forget(key) {
      reads.delete(key);
    },
  };
}
