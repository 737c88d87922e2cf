import type { Db } from '../platform/db.ts';

/** What a key lookup yields: the key's state and the environment it is bound to. */
export interface KeyRecord {
  status: string;
  environment: BoundEnvironment;
}

export interface BoundEnvironment {
  id: string;
  organizationSlug: string;
  pathValue: string;
  environmentKey: string;
  isProduction: boolean;
  removed: boolean;
  /** The organization's features (`join-by-email`, `attribute-trigger`). */
  features: string[];
}

export async function findKeyByHash(db: Db, hash: string): Promise<KeyRecord | null> {
  const key = await db.apiKey.findUnique({
    where: { hash },
    select: {
      status: true,
      environment: {
        select: {
          id: true,
          pathValue: true,
          environmentKey: true,
          isProduction: true,
          removedAt: true,
          organization: { select: { slug: true, features: true } },
        },
      },
    },
  });
  if (!key) return null;
  const e = key.environment;
  return {
    status: key.status,
    environment: {
      id: e.id,
      organizationSlug: e.organization.slug,
      pathValue: e.pathValue,
      environmentKey: e.environmentKey,
      isProduction: e.isProduction,
      removed: e.removedAt !== null,
      features: e.organization.features,
    },
  };
}
