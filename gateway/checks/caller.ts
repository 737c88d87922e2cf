// Checks 2 to 5: which environment the request names, and whether its API key may write there.
import { readEnvironmentHeader } from '../../environments/environment-header.ts';
import { extractApiKey, hashApiKey } from '../../environments/api-key.ts';
import type { KeyRecord } from '../../environments/environment-store.ts';
import { isValidPathValue } from '../../environments/org-slug.ts';
import type { AuthCache } from '../auth-cache.ts';
import { forbidden, invalidApiKey, invalidEnvironment, invalidOrgSlug, missingApiKey } from '../errors.ts';
import type { IngestContext, Step } from './chain.ts';

/** Check 2: the `{org_slug}` path value's format. */
export function orgSlug(ctx: IngestContext): void {
  const value = ctx.params.orgSlug ?? '';
  if (!isValidPathValue(value)) throw invalidOrgSlug();
  ctx.state.pathValue = value;
}

/** Check 3: `X-Service-Environment` format (400), and `production` (403). */
export function environmentHeader(ctx: IngestContext): void {
  const header = readEnvironmentHeader(ctx.req.headers['x-service-environment']);
  if (header.kind === 'invalid') throw invalidEnvironment();
  if (header.kind === 'production') throw forbidden();
  ctx.state.environmentKey = header.key;
}

/**
 * Check 4: a key is present (401 Missing) and names an active key (401 Invalid). Keys are
 * looked up by their SHA-256, so no stored secret is ever compared byte by byte. The key's
 * environment is what check 5 compares with the path and header. A key the cache can answer
 * for is checked without waiting; any other waits for PostgreSQL (auth-cache.ts).
 */
export function apiKey(cache: AuthCache): Step {
  return function apiKey(ctx) {
    const key = extractApiKey(ctx.req.headers);
    if (key === null) throw missingApiKey();
    const hash = hashApiKey(key);
    const known = cache.cached(hash);
    if (known !== undefined) return admit(ctx, hash, known);
    return cache.lookup(hash).then((record) => admit(ctx, hash, record));
  };
}

function admit(ctx: IngestContext, hash: string, record: KeyRecord | null): void {
  if (!record || record.status !== 'active') throw invalidApiKey();
  ctx.state.apiKeyHash = hash;
  ctx.state.environment = record.environment;
}

/**
 * Check 5: the key's environment must be the one the path value and the header name, and
 * must not be removed. A non-production key therefore never writes to Production.
 */
export function environmentBinding(ctx: IngestContext): void {
  const { environment, pathValue, environmentKey } = ctx.state;
  if (environment.removed || environment.pathValue !== pathValue || environment.environmentKey !== environmentKey) {
    throw forbidden();
  }
}

/** Checks 2 to 5 in product.md's order, as a route's first steps. */
export function callerChecks(cache: AuthCache): Step[] {
  return [orgSlug, environmentHeader, apiKey(cache), environmentBinding];
}
