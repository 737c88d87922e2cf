// What the values an in-memory cache keeps cost on V8's heap, so that a cache bounded in
// bytes (IDENTIFY_CACHE_MB, KEY_CACHE_MB) is bounded by what the process really spends,
// not by the length of its text. The figures are V8's object layouts on 64-bit Node without
// pointer compression (Node's own builds: every field a tagged 8-byte slot), checked against
// measured heap deltas by bench/cache-cost.mts and test/unit/cache-memory.test.ts. Where a
// layout varies, the larger figure is taken: a cache may hold a little less than its budget,
// never more.

const SLOT = 8;
const align = (n: number) => Math.ceil(n / SLOT) * SLOT;

// Any character outside ASCII may make V8 store the whole string with two bytes a character
// (Latin-1 text may stay at one; counting two there only errs on the safe side).
const NOT_ASCII = /[^\x00-\x7f]/;

/**
 * A string as a flat sequential string: map, hash and length, then the characters. Testing
 * the characters also flattens a string built by concatenation (a template literal, Node's
 * randomUUID: a tree of ~15 cons cells, ~480 bytes for 36 characters), which the next garbage
 * collection then replaces by its flat copy: so a string kept after this call costs what this
 * says. (A slice of a larger string would keep that string alive; the caches keep none.)
 */
export function stringBytes(s: string): number {
  return align(16 + (NOT_ASCII.test(s) ? 2 * s.length : s.length));
}

// A regular expression flattens its subject before matching; this one then matches at once.
// (Reading a character is not enough: V8 12+ reads through a cons string without flattening it.)
const FLATTEN = /^/;

/** The same for a string the caller knows is ASCII (a UUID, hex, digits, a fixed name): no scan. */
export function asciiBytes(s: string): number {
  FLATTEN.test(s);
  return align(16 + s.length);
}

/** A plain object of `fields` own properties, all in the object (literals, fixed shapes). */
export function objectBytes(fields: number): number {
  return 24 + SLOT * fields;
}

/** An object from `{}` or a spread: V8 gives it four in-object slots before it needs more. */
export const EMPTY_LITERAL_BYTES = objectBytes(4);

/** A number field: V8 boxes a double (a time in ms, any value past 2^31) in a 16-byte HeapNumber. */
export const NUMBER_BYTES = 16;

/** An array of `length` elements with exactly that capacity (a literal, `filter`, a spread); 0 for a shared empty array. */
export function arrayBytes(length: number): number {
  return length === 0 ? 0 : 32 + 16 + SLOT * length;
}

/**
 * One entry of a Map: three slots (key, value, chain) and half a bucket in V8's ordered hash
 * table, whose capacity doubles when full and may then be twice the entries it holds.
 */
export const MAP_ENTRY_BYTES = 2 * (3 * SLOT + SLOT / 2);
