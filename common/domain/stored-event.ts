// Serialization of stored events. JSON.stringify recurses and throws RangeError
// at a few thousand levels, while JSON.parse accepts far deeper input, so a body
// the gateway could parse must not become unstorable: past the stack limit an
// iterative serializer takes over, with byte-identical output.

export function serializeEvent(value: unknown): string {
  try {
    const text = JSON.stringify(value)
    if (text === undefined) throw new TypeError('Value is not serializable to JSON')
    return text
  } catch (error) {
    if (!(error instanceof RangeError)) throw error
    return serializeIteratively(value)
  }
}

// What JSON.stringify serializes in place of `value` held under `key`: the
// toJSON result, with Number/String/Boolean/BigInt wrappers unwrapped.
export function resolveJsonValue(key: string, value: unknown): unknown {
  if ((typeof value === 'object' && value !== null) || typeof value === 'bigint') {
    const toJSON = (value as { toJSON?: unknown }).toJSON
    if (typeof toJSON === 'function') value = toJSON.call(value, key)
  }
  if (typeof value === 'object' && value !== null) {
    if (value instanceof Number) return Number(value)
    if (value instanceof String) return String(value)
    if (value instanceof Boolean || value instanceof BigInt) return value.valueOf()
  }
  return value
}

// Arrays and non-wrapper objects are containers; functions are skipped like undefined.
export function isJsonContainer(value: unknown): value is object {
  return typeof value === 'object' && value !== null
}

type Frame =
  | { array: true; value: unknown[]; index: number }
  | { array: false; value: Record<string, unknown>; keys: string[]; index: number; wrote: boolean }

// Exported for tests, which compare it with JSON.stringify on shallow input.
export function serializeIteratively(root: unknown): string {
  const out: string[] = []
  const stack: Frame[] = []
  // JSON.stringify throws on cycles; so must this, or it would never end.
  const ancestors = new Set<object>()

  // Writes a leaf, or opens a container. Returns false when the value is
  // skipped (undefined, function, symbol).
  const open = (value: unknown): boolean => {
    if (!isJsonContainer(value)) {
      const text = JSON.stringify(value)
      if (text === undefined) return false
      out.push(text)
      return true
    }
    if (ancestors.has(value)) throw new TypeError('Converting circular structure to JSON')
    ancestors.add(value)
    if (Array.isArray(value)) {
      out.push('[')
      stack.push({ array: true, value, index: 0 })
    } else {
      out.push('{')
      const record = value as Record<string, unknown>
      stack.push({ array: false, value: record, keys: Object.keys(record), index: 0, wrote: false })
    }
    return true
  }

  if (!open(resolveJsonValue('', root))) throw new TypeError('Value is not serializable to JSON')

  while (stack.length > 0) {
    const frame = stack[stack.length - 1]
    if (frame.array) {
      if (frame.index < frame.value.length) {
        const i = frame.index++
        if (i > 0) out.push(',')
        // Unserializable array elements become null, as in JSON.stringify.
        if (!open(resolveJsonValue(String(i), frame.value[i]))) out.push('null')
        continue
      }
      out.push(']')
    } else {
      if (frame.index < frame.keys.length) {
        const key = frame.keys[frame.index++]
        const value = resolveJsonValue(key, frame.value[key])
        if (!isJsonContainer(value) && JSON.stringify(value) === undefined) continue
        out.push(frame.wrote ? ',' : '', JSON.stringify(key), ':')
        frame.wrote = true
        open(value)
        continue
      }
      out.push('}')
    }
    stack.pop()
    ancestors.delete(frame.value)
  }
  return out.join('')
}
