import type { Middleware } from 'koa';
import type { MetricsSource } from '../cluster/member.ts';
import type { Db } from '../../platform/db.ts';
import type { RedisMemory } from '../../platform/redis-memory.ts';
import type { Redis } from '../../platform/redis.ts';
import { readiness } from '../../platform/with-timeout.ts';
import type { EventBatcher } from '../event-batcher.ts';

/** Process is up. */
export const healthz: Middleware = async function healthz(ctx) {
  ctx.body = { status: 'ok' };
};

/**
 * PostgreSQL and Redis both answer within a second, (given `memory`) Redis is not full, and
 * (given `batcher`) at least one partition of the events queue is in Track's rotation. With
 * several partitions the body names those in and out: a gateway with some out stays ready, its
 * batches going to the others. Given `batcher`, Redis answers when a partition's master does.
 */
export function readyz(deps: { db: Db; redis: Redis; memory?: Pick<RedisMemory, 'reason'>; batcher?: Pick<EventBatcher, 'partitions' | 'ping'> }): Middleware {
  const { db, memory, batcher } = deps;
  const redis = batcher ?? deps.redis;
  return async function readyz(ctx) {
    const { ready, body } = await readiness({ db, redis, memory });
    const partitions = batcher?.partitions() ?? [];
    const names = { in: [] as string[], out: [] as string[] };
    for (const p of partitions) (p.rotation === 'in' ? names.in : names.out).push(p.name);
    const none = partitions.length > 0 && names.in.length === 0;
    ctx.status = ready && !none ? 200 : 503;
    ctx.body = {
      ...body,
      status: ready && !none ? 'ready' : 'unavailable',
      ...(partitions.length > 1 ? { partitions: names } : {}),
      ...(none && body.reason === undefined ? { reason: `no partition of the events queue takes batches (out: ${names.out.join(', ')})` } : {}),
    };
  };
}

export function metrics(source: MetricsSource): Middleware {
  return async function metrics(ctx) {
    ctx.body = await source.metrics();
    ctx.type = source.contentType;
  };
}
