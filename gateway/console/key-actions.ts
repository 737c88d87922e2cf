// Creating and revoking an API key from the console (the keys page and the admin API): the
// operator command's own functions (operations/keys.ts), each change audited with the
// operator's name. One home for both, so the page and the API cannot differ.
import type { Db } from '../../platform/db.ts';
import { createKey, revokeKey } from '../../operations/keys.ts';
import { MissingError, OperatorError, type OperatorDeps } from '../../operations/operator.ts';
import { auditChange } from './operators.ts';

type KeyEnvironment = { id: string; pathValue: string; removedAt: Date | null };

/** A new key of a live environment (the caller found it with findLiveEnvironment); audited as `key.create`. */
export async function createKeyAudited(deps: { db: Db; operator: OperatorDeps }, by: string, org: string, env: KeyEnvironment) {
  const created = await createKey(deps.operator, env);
  await auditChange(deps.db, by, 'key.create', `${org}/${env.pathValue}`, { suffix: created.suffix });
  return created;
}

/**
 * Revokes the keys ending in `suffix` as `intake key revoke` does (every gateway drops its cached
 * lookups); audited as `key.revoke`, with `notified: false` when a gateway did not confirm (the
 * key is revoked all the same and the error says so).
 */
export async function revokeKeyAudited(deps: { db: Db; operator: OperatorDeps }, by: string, org: string, env: KeyEnvironment, suffix: string) {
  const audit = (detail: Record<string, unknown>) => auditChange(deps.db, by, 'key.revoke', `${org}/${env.pathValue}`, { suffix, ...detail });
  try {
    const revoked = await revokeKey(deps.operator, env, suffix);
    await audit({});
    return revoked;
  } catch (err) {
    if (err instanceof OperatorError && !(err instanceof MissingError)) await audit({ notified: false });
    throw err;
  }
}
