// Path values and organization slugs: 1-63 chars, lowercase letters, digits,
// hyphens, starting and ending with a letter or digit (DNS-label-like).

// Non-production path values may also contain underscores.
const PATH_VALUE_RE = /^[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?$/;
const ORG_SLUG_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

// Checked on every request, for both production and other environments.
export function isValidPathValue(v: string): boolean {
  return PATH_VALUE_RE.test(v);
}

// Stricter: used when the operator creates an organization.
export function isValidOrgSlug(v: string): boolean {
  return ORG_SLUG_RE.test(v);
}
