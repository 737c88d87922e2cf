// JSON.stringify for caller data: it recurses and throws RangeError at a few thousand
// levels, while JSON.parse accepts far deeper input, so a body the gateway could parse
// must not become unstorable or unreadable (stored events and traits, the Profiles
// answer, operator output): past the stack limit an iterative serializer takes over,
// with byte-identical output.

//
// A value already held as JSON text (a profile's stored `fields`, traits merged off the event
// loop) is wrapped in JsonText and written verbatim wherever it appears: parsing 4 MB only to
// write the same 4 MB back would cost a gateway hundreds of milliseconds on a deep or wide value.

/** JSON text written as is by stringifyJson: the caller vouches that `text` is one valid JSON value. */
export class JsonText {
  constructor(readonly text: string) {}

  // JSON.stringify would write the wrapper, not the text: stringifyJson takes the iterative path.
  toJSON(): never {
    throw EMBEDDED_TEXT;
  }
}

const EMBEDDED_TEXT = new Error('JsonText is written by stringifyJson only');

// A small plain object with a JsonText member (checked only up to 8 members: a cheap test).
function hasTopLevelText(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  let members = 0;
  for (const key in value) {
    if (++members > 8) return false;
    if ((value as Record<string, unknown>)[key] instanceof JsonText) return true;
  }
  return false;
}

export function stringifyJson(value: unknown): string {
  if (value instanceof JsonText) return value.text;
  // A response embedding stored text (Profiles): straight to the path that writes it.
  if (hasTopLevelText(value)) return serializeIteratively(value);
  try {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('Value is not serializable to JSON');
    return text;
  } catch (error) {
    if (!(error instanceof RangeError) && error !== EMBEDDED_TEXT) throw error;
    return serializeIteratively(value);
  }
}

// What JSON.stringify serializes in place of `value` held under `key`: the
// toJSON result, with Number/String/Boolean/BigInt wrappers unwrapped.
export function resolveJsonValue(key: string, value: unknown): unknown {
  if (value instanceof JsonText) return value;
  if ((typeof value === 'object' && value !== null) || typeof value === 'bigint') {
    const toJSON = (value as { toJSON?: unknown }).toJSON;
    if (typeof toJSON === 'function') value = toJSON.call(value, key);
  }
  if (typeof value === 'object' && value !== null) {
    if (value instanceof Number) return Number(value);
    if (value instanceof String) return String(value);
    if (value instanceof Boolean || value instanceof BigInt) return value.valueOf();
  }
  return value;
}

function hasToJson(value: object): boolean {
  return typeof (value as { toJSON?: unknown }).toJSON === 'function' || value instanceof Number || value instanceof String || value instanceof Boolean;
}

// Arrays and non-wrapper objects are containers; functions are skipped like undefined.
export function isJsonContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

// The serializer's output: UTF-8 bytes in a growing buffer. Appending to a JS string costs an
// allocation per piece, and a value nested 2,000,000 levels deep is 4,000,000 one-byte pieces.
class Output {
  private buf = Buffer.allocUnsafe(1 << 10);
  private length = 0;

  byte(code: number): void {
    if (this.length === this.buf.length) this.grow(1);
    this.buf[this.length++] = code;
  }

  text(text: string): void {
    // Up to 3 UTF-8 bytes per UTF-16 unit (a surrogate pair is 4 bytes for 2 units).
    if (this.length + text.length * 3 > this.buf.length) this.grow(text.length * 3);
    this.length += this.buf.write(text, this.length, 'utf8');
  }

  toString(): string {
    return this.buf.toString('utf8', 0, this.length);
  }

  private grow(needed: number): void {
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.length + needed));
    this.buf.copy(next, 0, 0, this.length);
    this.buf = next;
  }
}

const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const COLON = 0x3a;

// Exported for tests, which compare it with JSON.stringify on shallow input. Linear in the size of
// the value whatever its shape: an explicit stack instead of recursion. The stack is two arrays
// (the open containers; for each, the next member's index × 2 + whether an object member was
// written) plus the keys of open objects only: a frame object per level, or five arrays, made
// the garbage collector the main cost on a value nested 2,000,000 levels deep.
export function serializeIteratively(root: unknown): string {
  const values: object[] = [];
  const next: number[] = [];
  const objectKeys: string[][] = [];
  const out = new Output();

  // Writes a value: a leaf's text, or opens a container. False when the value writes nothing.
  const write = (value: unknown): boolean => {
    if (value instanceof JsonText) {
      out.text(value.text);
      return true;
    }
    if (!isJsonContainer(value)) {
      const text = JSON.stringify(value);
      if (text === undefined) return false;
      out.text(text);
      return true;
    }
    // JSON.stringify throws on cycles; so must this, or it would never end. A cycle makes the
    // path from the root periodic, so comparing each container with the one at the largest
    // power-of-two depth above it finds any cycle within twice its depth (Brent), at O(1) a
    // level: a Set of ancestors cost more than the rest of the serializer on deep values.
    const depth = values.length;
    if (depth > 1 && values[1 << (31 - Math.clz32(depth))] === value) throw new TypeError('Converting circular structure to JSON');
    if (Array.isArray(value)) out.byte(OPEN_ARRAY);
    else {
      out.byte(OPEN_OBJECT);
      objectKeys.push(Object.keys(value));
    }
    values.push(value);
    next.push(0);
    return true;
  };

  if (!write(resolveJsonValue('', root))) throw new TypeError('Value is not serializable to JSON');
  while (values.length > 0) {
    const top = values.length - 1;
    const container = values[top];
    const state = next[top];
    const i = state >>> 1;
    if (Array.isArray(container)) {
      if (i < container.length) {
        next[top] = state + 2;
        if (i > 0) out.byte(COMMA);
        const element = container[i];
        // The index is a string key only for toJSON (building it for every element is measurable).
        const value = typeof element === 'object' && element !== null && !hasToJson(element) ? element : resolveJsonValue(String(i), element);
        // Unserializable array elements become null, as in JSON.stringify.
        if (!write(value)) out.text('null');
        continue;
      }
      out.byte(CLOSE_ARRAY);
    } else {
      const keys = objectKeys[objectKeys.length - 1];
      if (i < keys.length) {
        next[top] = state + 2;
        const key = keys[i];
        const value = resolveJsonValue(key, (container as Record<string, unknown>)[key]);
        // Unserializable object members are left out, as in JSON.stringify.
        if (!isJsonContainer(value) && !(value instanceof JsonText) && JSON.stringify(value) === undefined) continue;
        if (state & 1) out.byte(COMMA);
        else next[top] |= 1;
        out.text(JSON.stringify(key));
        out.byte(COLON);
        write(value);
        continue;
      }
      out.byte(CLOSE_OBJECT);
      objectKeys.pop();
    }
    values.pop();
    next.pop();
  }
  return out.toString();
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Whether JSON text nests deeper than `limit` levels, by a scan of its brackets (strings
 * skipped) that stops once it knows. JSON.stringify gives up on deep values only after
 * recursing to the stack limit, and that RangeError alone costs ~40 ms: a 16 KB body nested
 * 8,000 levels took ~45 ms to parse and serialize.
 */
export function nestsDeeperThan(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === BACKSLASH) i++;
      else if (c === QUOTE) inString = false;
    } else if (c === QUOTE) inString = true;
    else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limit) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return false;
}

/** What parseJsonBody returns for a body that is not JSON. */
export const NOT_JSON = Symbol('not JSON');

/**
 * A request body as any JSON value (validation names a scalar's type); an empty body is not
 * JSON. A `__proto__` key is ordinary data: JSON.parse makes it an own property.
 */
export function parseJsonBody(raw: string): unknown {
  if (raw === '') return NOT_JSON;
  try {
    return JSON.parse(raw);
  } catch {
    return NOT_JSON;
  }
}
