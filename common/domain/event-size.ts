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
