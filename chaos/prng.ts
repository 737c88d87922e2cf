// A seeded pseudo-random generator (xoshiro128**, seeded through splitmix32), so that a seed
// gives the same operations, fault schedule and order of starts on every machine. Each part of
// a run draws from a stream of its own (`fork`): a client that makes one request more (say,
// because a fault cut a connection) does not shift what the nemesis draws.

export interface Rng {
  /** A float in [0, 1). */
  next(): number;
  /** An integer in [0, n). */
  int(n: number): number;
  /** An integer in [min, max]. */
  between(min: number, max: number): number;
  /** True with probability p. */
  chance(p: number): boolean;
  pick<T>(items: readonly T[]): T;
  /** One key of `weights`, drawn in proportion to its weight. */
  weighted<K extends string>(weights: Readonly<Record<K, number>>): K;
  shuffle<T>(items: readonly T[]): T[];
  /** An independent stream named `label`, the same for the same seed and label. */
  fork(label: string): Rng;
}

function splitmix32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

/** FNV-1a over the label: mixes a fork's name into its seed. */
function hashLabel(label: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193) >>> 0;
  return h;
}

const rotl = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;

export function createRng(seed: number): Rng {
  const init = splitmix32(seed);
  const s: number[] = [init(), init(), init(), init()];
  if (!s.some((x) => x !== 0)) s[0] = 1;
  const nextU32 = () => {
    const result = Math.imul(rotl(Math.imul(s[1], 5) >>> 0, 7), 9) >>> 0;
    const t = (s[1] << 9) >>> 0;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return result;
  };
  const rng: Rng = {
    next: () => nextU32() / 2 ** 32,
    int: (n) => Math.floor(rng.next() * n),
    between: (min, max) => min + rng.int(max - min + 1),
    chance: (p) => rng.next() < p,
    pick: (items) => {
      if (!items.length) throw new Error('pick from an empty list');
      return items[rng.int(items.length)];
    },
    weighted: (weights) => {
      const entries = Object.entries(weights) as [keyof typeof weights, number][];
      const total = entries.reduce((sum, [, w]) => sum + w, 0);
      let x = rng.next() * total;
      for (const [key, w] of entries) {
        if (x < w) return key;
        x -= w;
      }
      return entries[entries.length - 1][0];
    },
    shuffle: (items) => {
      const out = [...items];
      for (let i = out.length - 1; i > 0; i--) {
        const j = rng.int(i + 1);
        [out[i], out[j]] = [out[j], out[i]];
      }
      return out;
    },
    fork: (label) => createRng((seed ^ hashLabel(label)) >>> 0),
  };
  return rng;
}
