import type { Middleware } from 'koa';
import type { MetricsSource } from '../cluster/member.ts';
import type { Db } from '../../common/db.ts';
import type { Redis } from '../../common/redis.ts';
import { readiness } from '../../common/with-timeout.ts';

/** Process is up. */
export const healthz: Middleware = async function healthz(ctx) {
  ctx.body = { status: 'ok' };
};

/** PostgreSQL and Redis both answer within a second. */
export function readyz(deps: { db: Db; redis: Redis }): Middleware {
  return async function readyz(ctx) {
    const { postgres, redis } = await readiness(deps);
    ctx.status = postgres && redis ? 200 : 503;
    ctx.body = { status: postgres && redis ? 'ready' : 'unavailable', postgres, redis };
  };
}

export function metrics(source: MetricsSource): Middleware {
  return async function metrics(ctx) {
    ctx.body = await source.metrics();
    ctx.type = source.contentType;
  };
}
