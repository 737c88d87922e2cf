// The Track size measure. The stored event (a JSON string) is embedded as a
// string inside the queue job's JSON, so every `"` and `\` is escaped again:
// that is why the spec says the measure "counts more than the raw body".

export const TRACK_EVENT_LIMIT_BYTES = 1_048_576;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

// Equals Buffer.byteLength(JSON.stringify(payload)) without building a second
// ~1 MB string. Valid only for JSON.stringify output: it holds no raw control
// characters or lone surrogates, so `"` and `\` are the only characters that
// JSON.stringify would escape (each to two bytes).
export function storedSize(payload: string): number {
  let escapes = 0;
  for (let i = 0; i < payload.length; i++) {
    const c = payload.charCodeAt(i);
    if (c === QUOTE || c === BACKSLASH) escapes++;
  }
  return Buffer.byteLength(payload, 'utf8') + escapes + 2;
}

/**
 * Whether the stored event is over the Track limit. A UTF-16 unit is at most 3 UTF-8 bytes and
 * an escaped one (`"` or `\`) only 2, so a payload this short is under the limit unscanned.
 */
export function overTrackLimit(payload: string): boolean {
  if (payload.length * 3 + 2 <= TRACK_EVENT_LIMIT_BYTES) return false;
  return storedSize(payload) > TRACK_EVENT_LIMIT_BYTES;
}
