// API keys as an operator manages them: `intake key` and the admin API (gateway/console).
import { generateApiKey, hashApiKey, keySuffix } from '../environments/api-key.ts';
import { MissingError, type OperatorDeps } from './operator.ts';

/** The status `key list` gives an unrevoked key of a removed environment. */
export const ENVIRONMENT_REMOVED = 'environment-removed';

/** An environment as the key operations take it (findEnvironment's). */
export type KeyEnvironment = { id: string; pathValue: string; removedAt: Date | null };

/** A new active key of a live environment (`intake key create` and the admin API): the only time the key is returned. */
export async function createKey(deps: Pick<OperatorDeps, 'db'>, env: KeyEnvironment) {
  const key = generateApiKey();
  // Gateways are not told: a miss cached for this hash would need someone to have sent the key
  // before it existed, and it has 238 random bits (docs/decisions.md).
  await deps.db.apiKey.create({ data: { environmentId: env.id, hash: hashApiKey(key), suffix: keySuffix(key) } });
  return { key, suffix: keySuffix(key), status: 'active', environment: env.pathValue };
}

/** The environment's keys by suffix, oldest first (`intake key list` and the admin API). */
export async function listKeys(deps: Pick<OperatorDeps, 'db'>, env: KeyEnvironment) {
  const keys = await deps.db.apiKey.findMany({ where: { environmentId: env.id }, orderBy: { createdAt: 'asc' } });
  const status = (k: (typeof keys)[number]) => (env.removedAt && k.status === 'active' ? ENVIRONMENT_REMOVED : k.status);
  return keys.map((k) => ({ suffix: k.suffix, status: status(k), environment: env.pathValue, createdAt: k.createdAt.getTime() }));
}

/**
 * Revokes the environment's keys ending in `suffix` and tells every gateway to drop its cached
 * lookups (`intake key revoke` and the admin API).
 */
export async function revokeKey(deps: Pick<OperatorDeps, 'db' | 'invalidateAuthCaches'>, env: KeyEnvironment, suffix: string) {
  const keys = await deps.db.apiKey.findMany({ where: { environmentId: env.id, suffix } });
  if (!keys.length) throw new MissingError(`no key ending in ${suffix} in ${env.pathValue}`);
  await deps.db.apiKey.updateMany({ where: { environmentId: env.id, suffix, status: 'active' }, data: { status: 'revoked', revokedAt: new Date() } });
  await deps.invalidateAuthCaches({ done: `key ${suffix} revoked`, stale: 'accept the key' });
  return { suffix, status: 'revoked' };
}
