import type { Queue } from 'bullmq';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { EventJob } from '../common/queues.ts';

/** What operator commands work with; built once in cli/intake.ts. */
export interface OperatorDeps {
  config: Config;
  db: Db;
  /** Tell every gateway to drop its cached key lookups (revocation, removal). */
  invalidateAuthCaches(): Promise<void>;
  eventsQueue(): Queue<EventJob>;
}

export class OperatorError extends Error {}

/** The environment an operator command acts on: Production unless `--env` names another. */
export async function findEnvironment(db: Db, orgSlug: string, pathValue: string | undefined) {
  const org = await db.organization.findUnique({ where: { slug: orgSlug } });
  if (!org) throw new OperatorError(`organization ${orgSlug} does not exist`);
  const env = await db.environment.findFirst({
    where: pathValue === undefined ? { organizationId: org.id, isProduction: true } : { organizationId: org.id, pathValue },
  });
  if (!env) throw new OperatorError(`environment ${pathValue} does not exist in ${orgSlug}`);
  return { org, env };
}
