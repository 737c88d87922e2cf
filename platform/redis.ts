import { Cluster, Redis as Single, type ClusterOptions, type RedisOptions } from 'ioredis';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';
import { releaseAnsweredCommandArguments } from './redis-answered-commands.ts';

/** A connection to the one Redis of REDIS_URL, or to the Redis Cluster of REDIS_CLUSTER_NODES. */
export type Redis = Single | Cluster;
export { Cluster, Single as SingleRedis };

export type RedisConfig = Pick<Config, 'redisUrl'> & Partial<Pick<Config, 'redisClusterNodes' | 'enqueueTimeoutMs'>>;

/**
 * The one place every Redis connection of intake is made. The two connection profiles BullMQ's
 * production guide asks for:
 * - producer (gateway): commands fail at once while Redis is away, so Track can answer 503
 *   instead of holding the request;
 * - worker / subscriber: retry forever, so workers resume by themselves when Redis returns.
 * Both reconnect in the background with a capped backoff.
 *
 * With REDIS_CLUSTER_NODES, a Cluster client with the same profiles. ioredis's Cluster defaults
 * would hold a producer's command instead of failing it: an offline queue while the cluster is
 * not ready, and 16 redirections 100 ms apart (longer than ENQUEUE_TIMEOUT_MS) while a slot has
 * no master. So the producer has no offline queue (a command for a node that is not connected
 * fails at once) and at most as many redirections as fit in half the enqueue bound: the gateway
 * can then try another partition within the same bound.
 */
export function createRedis(config: RedisConfig, profile: 'producer' | 'worker', log?: Logger): Redis {
  releaseAnsweredCommandArguments();
  const producer = profile === 'producer';
  const options: RedisOptions = producer
    ? { enableOfflineQueue: false, maxRetriesPerRequest: 1, connectTimeout: 2000 }
    : { enableOfflineQueue: true, maxRetriesPerRequest: null, connectTimeout: 5000 };
  const common: RedisOptions = {
    // TCP keepalive notices a server that vanished without closing the connection.
    keepAlive: 10_000,
  };
  const retry = (times: number) => Math.min(times * 100, 2000);
  let redis: Redis;
  if (config.redisClusterNodes?.length) {
    const retryDelayMs = 100;
    const clusterOptions: ClusterOptions = {
      enableOfflineQueue: options.enableOfflineQueue,
      clusterRetryStrategy: retry,
      retryDelayOnFailover: retryDelayMs,
      retryDelayOnClusterDown: retryDelayMs,
      retryDelayOnTryAgain: retryDelayMs,
      maxRedirections: producer ? Math.max(1, Math.floor((config.enqueueTimeoutMs ?? 2000) / 2 / retryDelayMs)) : 16,
      slotsRefreshTimeout: 1000,
      // Replicas promoted or nodes moved are learnt every few seconds even without an error.
      slotsRefreshInterval: 5000,
      redisOptions: { ...common, ...credentials(config.redisUrl), maxRetriesPerRequest: options.maxRetriesPerRequest, connectTimeout: options.connectTimeout },
    };
    // A managed cluster behind TLS announces node addresses that its certificate names: they are
    // connected to as given, not resolved first (ioredis's advice for such services).
    if (clusterOptions.redisOptions?.tls) clusterOptions.dnsLookup = (address, callback) => callback(null, address);
    redis = new Cluster(
      config.redisClusterNodes.map((node) => {
        const at = node.lastIndexOf(':');
        return { host: node.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(node.slice(at + 1)) };
      }),
      clusterOptions,
    );
  } else {
    redis = new Single(config.redisUrl, { ...options, ...common, retryStrategy: retry });
  }
  let down = false;
  redis.on('error', (err: Error) => {
    if (!down) log?.warn({ err: err.message, profile }, 'redis unavailable');
    down = true;
  });
  redis.on('ready', () => {
    if (down) log?.info({ profile }, 'redis reconnected');
    down = false;
  });
  return redis;
}

/**
 * What a Redis Cluster's nodes take from REDIS_URL: its user and password, and TLS for `rediss:`
 * (managed clusters ask for both; the nodes themselves come from REDIS_CLUSTER_NODES).
 */
export function credentials(redisUrl: string): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  const url = new URL(redisUrl);
  return {
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
  };
}
