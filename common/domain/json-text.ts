// JSON.stringify for caller data: it recurses and throws RangeError at a few thousand
// levels, while JSON.parse accepts far deeper input, so a body the gateway could parse
// must not become unstorable or unreadable (stored events and traits, the Profiles
// answer, operator output): past the stack limit an iterative serializer takes over,
// with byte-identical output.

export function stringifyJson(value: unknown): string {
  try {
    const text = JSON.stringify(value);
    if (text === undefined) throw new TypeError('Value is not serializable to JSON');
    return text;
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return serializeIteratively(value);
  }
}

// What JSON.stringify serializes in place of `value` held under `key`: the
// toJSON result, with Number/String/Boolean/BigInt wrappers unwrapped.
export function resolveJsonValue(key: string, value: unknown): unknown {
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

// Arrays and non-wrapper objects are containers; functions are skipped like undefined.
export function isJsonContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null;
}

type Frame = { array: true; value: unknown[]; index: number } | { array: false; value: Record<string, unknown>; keys: string[]; index: number; wrote: boolean };

interface State {
  out: string[];
  stack: Frame[];
  // JSON.stringify throws on cycles; so must this, or it would never end.
  ancestors: Set<object>;
}

function openContainer(state: State, value: object): void {
  if (state.ancestors.has(value)) throw new TypeError('Converting circular structure to JSON');
  state.ancestors.add(value);
  if (Array.isArray(value)) {
    state.out.push('[');
    state.stack.push({ array: true, value, index: 0 });
  } else {
    state.out.push('{');
    const record = value as Record<string, unknown>;
    state.stack.push({ array: false, value: record, keys: Object.keys(record), index: 0, wrote: false });
  }
}

// Exported for tests, which compare it with JSON.stringify on shallow input.
export function serializeIteratively(root: unknown): string {
  const state: State = { out: [], stack: [], ancestors: new Set() };
  const { out, stack } = state;

  const first = resolveJsonValue('', root);
  if (isJsonContainer(first)) {
    openContainer(state, first);
  } else {
    const text = JSON.stringify(first);
    if (text === undefined) throw new TypeError('Value is not serializable to JSON');
    out.push(text);
  }

  while (stack.length > 0) {
    const frame = stack[stack.length - 1];
    if (frame.array) {
      if (frame.index < frame.value.length) {
        const i = frame.index++;
        if (i > 0) out.push(',');
        const value = resolveJsonValue(String(i), frame.value[i]);
        if (isJsonContainer(value)) openContainer(state, value);
        // Unserializable array elements become null, as in JSON.stringify.
        else out.push(JSON.stringify(value) ?? 'null');
        continue;
      }
      out.push(']');
    } else {
      if (frame.index < frame.keys.length) {
        const key = frame.keys[frame.index++];
        const value = resolveJsonValue(key, frame.value[key]);
        const container = isJsonContainer(value);
        const text = container ? '' : JSON.stringify(value);
        // Unserializable object members are left out, as in JSON.stringify.
        if (text === undefined) continue;
        out.push(frame.wrote ? ',' : '', JSON.stringify(key), ':');
        frame.wrote = true;
        if (container) openContainer(state, value);
        else out.push(text);
        continue;
      }
      out.push('}');
    }
    stack.pop();
    state.ancestors.delete(frame.value);
  }
  return out.join('');
}
