// An array parameter as PostgreSQL's array literal. node-postgres builds it element by element,
// with two regex replaces per element and string concatenation: on Identify's batches (tens of
// arrays of tens of elements) that is the largest allocation of the gateway's thread (sampling
// heap profiler). The same text, with one test per element and one join.
// A string without control characters or surrogates is written by JSON.stringify, which then
// escapes exactly what an array literal does (`"` and `\`), natively and in one allocation; a
// regex replace, kept for the others, would otherwise be the largest allocation of an Identify batch.
const NOT_AS_JSON = /[\u0000-\u001f\ud800-\udfff]/;
const ESCAPE = /["\\]/g;
// Nothing to escape (ids, digests, times, digits): quoted as it is, one scan and no JSON.stringify.
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
