import { generateApiKey, hashApiKey, keySuffix } from '../../environments/api-key.ts';
import { environmentCommand, findEnvironment, findLiveEnvironment, OperatorError, type OperatorDeps } from '../operator.ts';

/** The status `key list` gives an unrevoked key of a removed environment. */
export const ENVIRONMENT_REMOVED = 'environment-removed';

/** key create <org-slug> [--env <path-value>]: the only time the key itself is printed. */
export async function keyCreate(deps: OperatorDeps, argv: string[]) {
  const { env } = await environmentCommand(deps, argv, 'key create', findLiveEnvironment);
  const key = generateApiKey();
  // Gateways are not told: a miss cached for this hash would need someone to have sent the key
  // before it existed, and it has 238 random bits (docs/decisions.md).
  await deps.db.apiKey.create({ data: { environmentId: env.id, hash: hashApiKey(key), suffix: keySuffix(key) } });
  return { key, suffix: keySuffix(key), status: 'active', environment: env.pathValue };
}

/**
 * key list <org-slug> [--env <path-value>]. A removed environment's keys that were not revoked
 * answer 403 (check 5, product.md), so they are listed as `environment-removed`, not `active`.
 */
export async function keyList(deps: OperatorDeps, argv: string[]) {
  const { env } = await environmentCommand(deps, argv, 'key list');
  const keys = await deps.db.apiKey.findMany({ where: { environmentId: env.id }, orderBy: { createdAt: 'asc' } });
  const status = (k: (typeof keys)[number]) => (env.removedAt && k.status === 'active' ? ENVIRONMENT_REMOVED : k.status);
  return keys.map((k) => ({ suffix: k.suffix, status: status(k), environment: env.pathValue, createdAt: k.createdAt.getTime() }));
}

/**
 * key revoke <org-slug> <suffix> [--env <path-value>]: 401 on every gateway from the moment this
 * succeeds; when the gateways could not all be told, it fails saying so (and a second run, once
 * they can, tells them).
 */
export async function keyRevoke(deps: OperatorDeps, argv: string[]) {
  const {
    env,
    positionals: [, suffix],
  } = await environmentCommand(deps, argv, 'key revoke');
  const keys = await deps.db.apiKey.findMany({ where: { environmentId: env.id, suffix } });
  if (!keys.length) throw new OperatorError(`no key ending in ${suffix} in ${env.pathValue}`);
  await deps.db.apiKey.updateMany({ where: { environmentId: env.id, suffix, status: 'active' }, data: { status: 'revoked', revokedAt: new Date() } });
  await deps.invalidateAuthCaches({ done: `key ${suffix} revoked`, stale: 'accept the key' });
  return { suffix, status: 'revoked' };
}
