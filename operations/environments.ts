// An organization's environments as an operator lists them: `intake env list` and the admin API.
import { MissingError, type OperatorDeps } from './operator.ts';

/** The organization's environments, Production first (`intake env list` and the admin API). */
export async function listEnvironments(deps: Pick<OperatorDeps, 'db'>, orgSlug: string) {
  const org = await deps.db.organization.findUnique({ where: { slug: orgSlug }, include: { environments: true } });
  if (!org) throw new MissingError(`organization ${orgSlug} does not exist`);
  const environments = [...org.environments].sort((a, b) => Number(b.isProduction) - Number(a.isProduction) || a.createdAt.getTime() - b.createdAt.getTime());
  return environments.map((e) => ({
    org: orgSlug,
    pathValue: e.pathValue,
    key: e.environmentKey,
    production: e.isProduction,
    removed: e.removedAt !== null,
    createdAt: e.createdAt.getTime(),
  }));
}
