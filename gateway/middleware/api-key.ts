import type { Middleware } from 'koa';
import { extractApiKey, hashApiKey } from '../../environments/api-key.ts';
import type { AuthCache } from '../auth-cache.ts';
import { invalidApiKey, missingApiKey } from '../errors.ts';
import type { IngestState } from '../state.ts';

/**
 * Check 4: a key is present (401 Missing) and names an active key (401 Invalid). Keys are
 * looked up by their SHA-256, so no stored secret is ever compared byte by byte. The key's
 * environment is what check 5 compares with the path and header.
 */
export function apiKey(cache: AuthCache): Middleware<IngestState> {
  return async function apiKey(ctx, next) {
    const key = extractApiKey(ctx.req.headers);
    if (key === null) throw missingApiKey();
    const hash = hashApiKey(key);
    const record = await cache.lookup(hash);
    if (!record || record.status !== 'active') throw invalidApiKey();
    ctx.state.apiKeyHash = hash;
    ctx.state.environment = record.environment;
    await next();
  };
}
