// An organization's environments and API keys as the console's keys page lists them
// (gateway/console/pages/keys.ts): by suffix, status and creation time. Only the suffix is
// read: neither a key (never stored) nor its hash leaves the database. Lookups by key: the
// organization by slug, its environments by (organization_id, …), their keys by environment_id.
import type { Db } from '../platform/db.ts';

/** The status of an unrevoked key of a removed environment (as `intake key list` says it). */
const ENVIRONMENT_REMOVED = 'environment-removed';

/** Organizations a page lists at most (newest first); any other is reached by its slug. */
export const ORGANIZATIONS_LISTED = 500;

export interface OrganizationKeys {
  slug: string;
  createdAt: number;
  environments: {
    pathValue: string;
    environmentKey: string;
    isProduction: boolean;
    removedAt: number | null;
    createdAt: number;
    keys: { suffix: string; status: string; createdAt: number; revokedAt: number | null }[];
  }[];
}

export async function listOrganizations(db: Db): Promise<{ slug: string; createdAt: number; environments: number }[]> {
  const rows = await db.organization.findMany({
    orderBy: { createdAt: 'desc' },
    take: ORGANIZATIONS_LISTED,
    select: { slug: true, createdAt: true, _count: { select: { environments: true } } },
  });
  return rows.map((r) => ({ slug: r.slug, createdAt: r.createdAt.getTime(), environments: r._count.environments }));
}

/** An organization's environments (Production first) and their keys (oldest first), or null. */
export async function organizationKeys(db: Db, slug: string): Promise<OrganizationKeys | null> {
  const org = await db.organization.findUnique({
    where: { slug },
    select: {
      slug: true,
      createdAt: true,
      environments: {
        orderBy: [{ isProduction: 'desc' }, { createdAt: 'asc' }],
        select: {
          pathValue: true,
          environmentKey: true,
          isProduction: true,
          removedAt: true,
          createdAt: true,
          apiKeys: { orderBy: { createdAt: 'asc' }, select: { suffix: true, status: true, createdAt: true, revokedAt: true } },
        },
      },
    },
  });
  if (!org) return null;
  return {
    slug: org.slug,
    createdAt: org.createdAt.getTime(),
    environments: org.environments.map((e) => ({
      pathValue: e.pathValue,
      environmentKey: e.environmentKey,
      isProduction: e.isProduction,
      removedAt: e.removedAt?.getTime() ?? null,
      createdAt: e.createdAt.getTime(),
      keys: e.apiKeys.map((k) => ({
        suffix: k.suffix,
        status: e.removedAt && k.status === 'active' ? ENVIRONMENT_REMOVED : k.status,
        createdAt: k.createdAt.getTime(),
        revokedAt: k.revokedAt?.getTime() ?? null,
      })),
    })),
  };
}
