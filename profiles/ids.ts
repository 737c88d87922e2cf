// An ID that is empty or only whitespace counts as absent: Track needs a userId or an
// anonymousId that is not blank, Identify a userId that is not blank (zod's trim().min(1)), and
// journeys key people by a userId that is not blank. Such an ID is still stored as sent.
const NON_WHITESPACE = /\S/;

export function hasId(value: string | null | undefined): value is string {
  return typeof value === 'string' && NON_WHITESPACE.test(value);
}
