import { Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';

export type { Redis };

/**
 * The two connection profiles BullMQ's production guide asks for:
 * - producer (gateway): commands fail at once while Redis is away, so Track can answer 503
 *   instead of holding the request;
 * - worker / subscriber: retry forever, so workers resume by themselves when Redis returns.
 * Both reconnect in the background with a capped backoff.
 */
export function createRedis(config: Pick<Config, 'redisUrl'>, profile: 'producer' | 'worker', log?: Logger): Redis {
  const options: RedisOptions =
    profile === 'producer'
      ? { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 }
      : { enableOfflineQueue: true, maxRetriesPerRequest: null, connectTimeout: 5000 };
  const redis = new Redis(config.redisUrl, {
    ...options,
    retryStrategy: (times) => Math.min(times * 100, 2000),
    // TCP keepalive notices a server that vanished without closing the connection.
    keepAlive: 10_000,
  });
  let down = false;
  redis.on('error', (err) => {
    if (!down) log?.warn({ err: err.message, profile }, 'redis unavailable');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log?.info({ profile }, 'redis reconnected');
    down = false;
  });
  return redis;
}
