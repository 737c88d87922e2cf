import type { Middleware } from 'koa';
import type { MetricsSource } from '../cluster/member.ts';
import type { Db } from '../../common/db.ts';
import type { RedisMemory } from '../../common/redis-memory.ts';
import type { Redis } from '../../common/redis.ts';
import { readiness } from '../../common/with-timeout.ts';

/** Process is up. */
export const healthz: Middleware = async function healthz(ctx) {
  ctx.body = { status: 'ok' };
};

/** PostgreSQL and Redis both answer within a second, and (given `memory`) Redis is not full. */
export function readyz(deps: { db: Db; redis: Redis; memory?: Pick<RedisMemory, 'reason'> }): Middleware {
  return async function readyz(ctx) {
    const { ready, body } = await readiness(deps);
    ctx.status = ready ? 200 : 503;
    ctx.body = body;
  };
}

export function metrics(source: MetricsSource): Middleware {
  return async function metrics(ctx) {
    ctx.body = await source.metrics();
    ctx.type = source.contentType;
  };
}
