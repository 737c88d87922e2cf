// zod-style name of a value's type, as used in "Expected X, received Y".
// JSON bodies only hold the first six; typeof covers anything else.
export function receivedType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

// JSON values can only have these types; the message tables avoid building strings per request.
export const JSON_TYPES = ['null', 'array', 'string', 'number', 'boolean', 'object'] as const;
export type JsonType = (typeof JSON_TYPES)[number];

/** zod's "Expected X, received Y" for every JSON type Y, built once. */
export function messagesFor(expected: string): Readonly<Record<JsonType, string>> {
  const table = {} as Record<JsonType, string>;
  for (const t of JSON_TYPES) table[t] = `Expected ${expected}, received ${t}`;
  return Object.freeze(table);
}
