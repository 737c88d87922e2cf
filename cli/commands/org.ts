import { isValidOrgSlug } from '../../environments/org-slug.ts';
import { PRODUCTION_KEY } from '../../environments/environment-header.ts';
import { FEATURES } from '../../environments/features.ts';
import { readArgs } from '../args.ts';
import { OperatorError, type OperatorDeps } from '../../operations/operator.ts';

function parseFeatures(raw: string | undefined, usageError: (message: string) => Error): string[] {
  const list = (raw ?? '')
    .split(',')
    .map((f) => f.trim())
    .filter(Boolean);
  const unknown = list.filter((f) => !(FEATURES as readonly string[]).includes(f));
  if (unknown.length) throw usageError(`unknown feature ${unknown.join(', ')} (known: ${FEATURES.join(', ')})`);
  return [...new Set(list)].sort();
}

/**
 * An org command's slug and feature list (`org create`'s --features, `org features`' --set). A new
 * organization's slug is checked first: one that cannot be a path value is a usage mistake.
 */
function readOrgArgs(argv: string[], command: 'org create' | 'org features'): { slug: string; features: string[] } {
  const { positionals, values, usageError } = readArgs(argv, command);
  const [slug] = positionals;
  if (command === 'org create' && !isValidOrgSlug(slug))
    throw usageError(`invalid slug ${JSON.stringify(slug)}: 1-63 lowercase letters, digits or hyphens, starting and ending with a letter or digit`);
  return { slug, features: parseFeatures(command === 'org create' ? values.features : values.set, usageError) };
}

/** org create <slug> [--features f1,f2]: the organization and its Production environment. */
export async function orgCreate(deps: OperatorDeps, argv: string[]) {
  const { slug, features } = readOrgArgs(argv, 'org create');
  if (await deps.db.environment.findUnique({ where: { pathValue: slug } })) {
    throw new OperatorError(`slug ${slug} is already taken`);
  }
  const org = await deps.db.organization
    .create({
      data: { slug, features, environments: { create: { pathValue: slug, environmentKey: PRODUCTION_KEY, isProduction: true } } },
    })
    .catch(uniqueAs(`slug ${slug} is already taken`));
  return { slug: org.slug, features: org.features };
}

/** org features <slug> --set f1,f2 */
export async function orgFeatures(deps: OperatorDeps, argv: string[]) {
  const { slug, features } = readOrgArgs(argv, 'org features');
  const org = await deps.db.organization.update({ where: { slug }, data: { features } }).catch((err) => {
    if ((err as { code?: string }).code === 'P2025') throw new OperatorError(`organization ${slug} does not exist`);
    throw err;
  });
  // Gateways cache features with the key lookup.
  await deps.invalidateAuthCaches({ done: `features of ${slug} set`, stale: 'apply the ones it had' });
  return { slug: org.slug, features: org.features };
}

/** Turns a unique-constraint violation (a concurrent create) into an operator message. */
export function uniqueAs(message: string) {
  return (err: unknown): never => {
    if ((err as { code?: string }).code === 'P2002') throw new OperatorError(message);
    throw err;
  };
}
