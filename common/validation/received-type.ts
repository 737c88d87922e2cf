// zod-style name of a value's type, as used in "Expected X, received Y".
// JSON bodies only hold the first six; typeof covers anything else.
export function receivedType(v: unknown): string {
  if (v === null) return 'null'
  if (Array.isArray(v)) return 'array'
  return typeof v
}
