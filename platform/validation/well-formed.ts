// Identifiers (Track's messageId, userId and anonymousId; Identify's userId and messageId) must be
// well-formed Unicode. A JSON string can carry an unpaired UTF-16 surrogate (`"\ud800"`), which
// no UTF-8 text holds: such a user ID has no Profiles URL (percent-encoding is of UTF-8) and such
// a messageId cannot be typed to `intake events get`, so the caller could never name the record
// again. Free values (traits, properties, context, event names) keep any JSON string: they are
// stored and read back exactly. See docs/decisions.md.

/** The issue (Identify) and the first-problem text (Track) of an identifier with an unpaired surrogate. */
export const NOT_WELL_FORMED_MESSAGE = 'String must be well-formed Unicode (no unpaired surrogate)';

declare global {
  interface String {
    // ES2024, in V8 since 11.1 (Node 20); TypeScript declares it from its ES2024 lib only.
    isWellFormed(): boolean;
  }
}

/** Whether a string has no unpaired surrogate (native: no allocation, a scan of the string). */
export function isWellFormed(value: string): boolean {
  return value.isWellFormed();
}
