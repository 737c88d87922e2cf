import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Config } from '../common/config.ts';
import type { Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import { authCacheChannels, createEventsQueue } from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';
import { createApp } from './app.ts';
import { createAuthCache } from './auth-cache.ts';
import { createEventBatcher } from './event-batcher.ts';

export interface Gateway {
  port: number;
  close(): Promise<void>;
}

/** Listen on config.port (0 picks a free one); close() drains in-flight requests, then the pools. */
export async function startGateway(deps: { config: Config; db: Db; log: Logger }): Promise<Gateway> {
  const { config, db, log } = deps;
  const redis = createRedis(config, 'producer', log);
  const subscriber = createRedis(config, 'worker', log);
  const eventsQueue = createEventsQueue(config, redis);
  eventsQueue.on('error', (err) => log.warn({ err: err.message }, 'events queue'));
  const authCache = createAuthCache({ db, subscriber, publisher: redis, channels: authCacheChannels(config), ttlMs: config.keyCacheTtlMs, log });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  const batcher = createEventBatcher(eventsQueue, { maxBatch: config.trackBatchMax, timeoutMs: config.enqueueTimeoutMs });
  const app = createApp({ config, db, redis, batcher, authCache, registry, log });
  const server = http.createServer(app.callback());
  // Slow or stalled clients cannot hold a connection (and its buffers) for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 65_000;

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port }, 'gateway listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= (async () => {
        const drained = new Promise<void>((resolve) => server.close(() => resolve()));
        // Keep-alive connections go idle as their last response is sent: close each then.
        const sweep = setInterval(() => server.closeIdleConnections(), 50);
        server.closeIdleConnections();
        const deadline = new Promise<void>((resolve) => setTimeout(resolve, config.shutdownTimeoutMs).unref());
        await Promise.race([drained, deadline]);
        clearInterval(sweep);
        server.closeAllConnections();
        await authCache.close();
        await eventsQueue.close().catch(() => {});
        redis.disconnect();
        log.info('gateway stopped');
      })()),
  };
}
