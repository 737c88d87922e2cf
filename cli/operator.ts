import type { Queue } from 'bullmq';
import type { Config } from '../common/config.ts';
import { createDb, type Db } from '../common/db.ts';
import { cacheInvalidationChannel, createEventsQueue, type EventJob } from '../common/queues.ts';
import { createRedis, type Redis } from '../common/redis.ts';

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

/** Clients for operator commands, opened lazily (most commands need only PostgreSQL). */
export function openOperator(config: Config, db: Db = createDb(config)): OperatorDeps & { close(): Promise<void> } {
  let redis: Redis | undefined;
  let queue: Queue<EventJob> | undefined;
  const connect = () => (redis ??= createRedis(config, 'worker'));
  return {
    config,
    db,
    async invalidateAuthCaches() {
      const publish = connect().publish(cacheInvalidationChannel(config), String(Date.now()));
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('timeout')), 3000)));
      await Promise.race([publish, timeout])
        .catch(() => console.error('warning: Redis unreachable; gateways read keys through to PostgreSQL until they reconnect'))
        .finally(() => clearTimeout(timer));
    },
    eventsQueue: () => (queue ??= createEventsQueue(config, connect())),
    async close() {
      await queue?.close().catch(() => {});
      redis?.disconnect();
      await db.$disconnect();
    },
  };
}
