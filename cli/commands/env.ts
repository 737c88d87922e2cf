import { isValidEnvironmentKey } from '../../environments/environment-header.ts';
import { isValidPathValue } from '../../environments/org-slug.ts';
import { readArgs } from '../args.ts';
import { MissingError, OperatorError, findEnvironment, type OperatorDeps } from '../../operations/operator.ts';
import { listEnvironments } from '../../operations/environments.ts';
import { uniqueAs } from './org.ts';

/** env create <org-slug> <path-value> --key <environment-key> */
export async function envCreate(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug, pathValue],
    values,
    usageError,
  } = readArgs(argv, 'env create');
  const key = values.key!; // required by the table
  if (!isValidPathValue(pathValue))
    throw usageError(
      `invalid path value ${JSON.stringify(pathValue)}: 1-63 lowercase letters, digits, hyphens or underscores, starting and ending with a letter or digit`,
    );
  if (!isValidEnvironmentKey(key))
    throw usageError(`invalid environment key ${JSON.stringify(key)}: 1-32 lowercase letters, digits or hyphens, not prod or production`);
  const org = await deps.db.organization.findUnique({ where: { slug: orgSlug } });
  if (!org) throw new MissingError(`organization ${orgSlug} does not exist`);
  await deps.db.environment
    .create({ data: { organizationId: org.id, pathValue, environmentKey: key, isProduction: false } })
    .catch(uniqueAs(`path value ${pathValue} or environment key ${key} is already taken`));
  return { org: orgSlug, pathValue, key };
}

/** env remove <org-slug> <path-value>: requests for it answer 403 from now on, keys included. */
export async function envRemove(deps: OperatorDeps, argv: string[]) {
  const {
    positionals: [orgSlug, pathValue],
  } = readArgs(argv, 'env remove');
  const { env } = await findEnvironment(deps.db, orgSlug, pathValue);
  if (env.isProduction) throw new OperatorError('Production cannot be removed');
  if (!env.removedAt) await deps.db.environment.update({ where: { id: env.id }, data: { removedAt: new Date() } });
  await deps.invalidateAuthCaches({ done: `environment ${pathValue} removed`, stale: 'accept its requests' });
  return { org: orgSlug, pathValue, removed: true };
}

/** env list <org-slug> */
export async function envList(deps: OperatorDeps, argv: string[]) {
  const [orgSlug] = readArgs(argv, 'env list').positionals;
  return listEnvironments(deps, orgSlug);
}
