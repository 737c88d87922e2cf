import { environmentCommand } from '../environment-command.ts';
import { findLiveEnvironment, type OperatorDeps } from '../../operations/operator.ts';
import { createKey, listKeys, revokeKey } from '../../operations/keys.ts';

/** key create <org-slug> [--env <path-value>]: the only time the key itself is printed. */
export async function keyCreate(deps: OperatorDeps, argv: string[]) {
  const { env } = await environmentCommand(deps, argv, 'key create', findLiveEnvironment);
  return createKey(deps, env);
}

/**
 * key list <org-slug> [--env <path-value>]. A removed environment's keys that were not revoked
 * answer 403 (check 5, product.md), so they are listed as `environment-removed`, not `active`.
 */
export async function keyList(deps: OperatorDeps, argv: string[]) {
  const { env } = await environmentCommand(deps, argv, 'key list');
  return listKeys(deps, env);
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
  return revokeKey(deps, env, suffix);
}
