// A Map in least-recently-used order within a budget of bytes: the one eviction rule of the
// gateway's caches (profiles, API keys). Each value carries what it costs (platform/heap-size.ts)
// and the budget bounds the sum, so many small entries and a few large ones are bounded alike.
// A Map keeps insertion order, so "use" is delete-then-set and the first entry is the oldest;
// using the newest entry again (a gateway's one busy API key) moves nothing.

export interface Sized {
  /** What the entry costs: its key and value on the heap, and its place in the Map. */
  bytes: number;
}

export class Lru<K, V extends Sized> {
  private readonly entries = new Map<K, V>();
  private total = 0;
  /** The key last set or moved to the end: still at the end, or no longer held (every insertion is a set). */
  private newest: K | undefined;

  /** `evicted`: told of each entry the budget pushes out (not of those deleted or replaced). */
  constructor(
    readonly maxBytes: number,
    private readonly evicted?: (key: K, value: V) => void,
  ) {}

  get bytes(): number {
    return this.total;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value, left where it is in the order. */
  peek(key: K): V | undefined {
    return this.entries.get(key);
  }

  /** The value, now the most recently used. */
  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined && key !== this.newest) {
      this.entries.delete(key);
      this.entries.set(key, value);
      this.newest = key;
    }
    return value;
  }

  /** Adds or replaces (the value is then the most recently used); call trim() once a change is complete. */
  set(key: K, value: V): void {
    const old = this.entries.get(key);
    if (old !== undefined) {
      this.entries.delete(key);
      this.total -= old.bytes;
    }
    this.entries.set(key, value);
    this.total += value.bytes;
    this.newest = key;
  }

  /** A held value now costs `delta` bytes more (or less). */
  resize(value: V, delta: number): void {
    value.bytes += delta;
    this.total += delta;
  }

  delete(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    this.entries.delete(key);
    this.total -= value.bytes;
    return value;
  }

  /** Evicts the least recently used entries until the budget holds. */
  trim(): void {
    // Within the budget (nearly always) no iterator is made: a Map's iterator first steps over the
    // slots its deletes left, which the use order's delete-then-set leaves at its head.
    if (this.total <= this.maxBytes) return;
    for (const [key, value] of this.entries) {
      if (this.total <= this.maxBytes) return;
      this.entries.delete(key);
      this.total -= value.bytes;
      this.evicted?.(key, value);
    }
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
    this.newest = undefined;
  }
}
