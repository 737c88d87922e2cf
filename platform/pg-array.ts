// An array parameter as PostgreSQL's array literal. node-postgres builds it element by element,
// with two regex replaces per element and string concatenation: on Identify's batches (tens of
// arrays of tens of elements) that is the largest allocation of the gateway's thread (sampling
// heap profiler). The same text, each element in one writing, and one join.
// A string element takes the cheapest of three writings of the same text:
// - nothing to escape (ids, digests, times, digits): quoted as it is, after one regex test;
// - quotes or backslashes but no control characters or surrogates (the JSON texts of traits and
//   their times): JSON.stringify, which then escapes exactly what an array literal does, natively
//   and in one allocation;
// - the rest (rare): a regex replace of `"` and `\`.
const NOT_AS_JSON = /[\u0000-\u001f\ud800-\udfff]/;
const ESCAPE = /["\\]/g;
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;

/** The literal node-postgres would send for `values`, or null for an element kind it encodes itself (nested arrays, buffers, dates, objects). */
export function pgArrayLiteral(values: readonly unknown[]): string | null {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v === null || v === undefined) parts[i] = 'NULL';
    else if (typeof v === 'string') parts[i] = PLAIN.test(v) ? `"${v}"` : NOT_AS_JSON.test(v) ? `"${v.replace(ESCAPE, '\\$&')}"` : JSON.stringify(v);
    else if (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'boolean') parts[i] = `"${String(v)}"`;
    else return null;
  }
  return `{${parts.join(',')}}`;
}
