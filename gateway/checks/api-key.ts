import { extractApiKey, hashApiKey } from '../../environments/api-key.ts';
import type { KeyRecord } from '../../environments/environment-store.ts';
import type { AuthCache } from '../auth-cache.ts';
import { invalidApiKey, missingApiKey } from '../errors.ts';
import type { IngestContext, Step } from './chain.ts';

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
