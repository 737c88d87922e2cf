import http from 'node:http';
import { resourceLimits } from 'node:worker_threads';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Config } from '../common/config.ts';
import { createJsonPool } from '../common/json-pool.ts';
import { drain, listen } from '../common/listen.ts';
import { poolOf, type Db } from '../common/db.ts';
import type { Logger } from '../common/logger.ts';
import { authCacheChannels, closeQueues, createEventsQueue } from '../common/queues.ts';
import { createRedis } from '../common/redis.ts';
import { createApp } from './app.ts';
import { createAuthCache } from './auth-cache.ts';
import { answerClientError } from './client-error.ts';
import { createEventBatcher } from './event-batcher.ts';
import { createIdentifyBatcher } from './identify-batcher.ts';
import { createProfileReader } from './profile-reader.ts';
import { createGatewayMetrics } from './metrics/gateway-metrics.ts';
import { createOverloadGuard } from './middleware/overload.ts';
import type { ClusterMember } from './cluster/member.ts';

export interface Gateway {
  port: number;
  close(): Promise<void>;
}

/**
 * Listen on config.port (0 picks a free one); close() drains in-flight requests, then the pools.
 * `cluster`: this is one of several processes of one gateway (gateway/cluster/primary.ts), which
 * announces the port once for all and answers /metrics for all.
 */
export async function startGateway(deps: { config: Config; db: Db; log: Logger; cluster?: ClusterMember }): Promise<Gateway> {
  const { config, db, log } = deps;
  const redis = createRedis(config, 'producer', log);
  const subscriber = createRedis(config, 'worker', log);
  const eventsQueue = createEventsQueue(config, redis);
  eventsQueue.on('error', (err) => log.warn({ err: err.message }, 'events queue'));
  const authCache = createAuthCache({ db, subscriber, publisher: redis, channels: authCacheChannels(config), ttlMs: config.keyCacheTtlMs, log });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const overload = createOverloadGuard(config.maxInFlight);
  const metrics = createGatewayMetrics({ registry, eventsQueue, overload, queueScrapeTimeoutMs: 1000 });

  const batcher = createEventBatcher(eventsQueue, {
    maxBatch: config.trackBatchMax,
    maxBytes: config.trackBatchBytes,
    timeoutMs: config.enqueueTimeoutMs,
    onBatch: metrics.observeBatch,
  });
  const json = createJsonPool({ threads: deps.cluster?.jsonThreads });
  const identifyBatcher = createIdentifyBatcher(poolOf(db), json, {
    maxBatch: config.identifyBatchMax,
    maxInFlight: config.identifyBatchesInFlight,
    overlapMs: config.identifyBatchOverlapMs,
    cacheMb: config.identifyCacheMb,
  });
  // Reads hold a connection for one statement: up to the pool less what Identify's batches use
  // (at least two, so one slow read, say a connection attempt to a stalled server, does not
  // hold every other read for its whole timeout).
  const profileReader = createProfileReader(poolOf(db), {
    maxBatch: 256,
    maxInFlight: Math.max(2, config.databasePoolSize - config.identifyBatchesInFlight - 1),
  });
  const scraped = deps.cluster ? deps.cluster.shareMetrics(registry) : registry;
  const app = createApp({
    config,
    db,
    redis,
    batcher,
    identifyBatcher,
    profileReader,
    authCache,
    metrics: scraped,
    overload: overload.middleware,
    observeRequest: metrics.observeRequest,
    log,
    json,
  });
  // Node enforces the two timeouts below only when it sweeps connections (every 30 s by default),
  // which would let a stalled client hold its connection for up to 40 s instead of 10.
  const server = http.createServer({ connectionsCheckingInterval: 1000, maxHeaderSize: config.maxHeaderBytes }, app.callback());
  server.on('clientError', answerClientError);
  // A client that sends its request and then closes its side (shutdown(SHUT_WR), `nc -N`) still
  // gets the answer; by default Node drops the request's response when the client's FIN arrives.
  (server as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Slow or stalled clients cannot hold a connection (and its buffers) for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 65_000;

  const port = await listen(server, config.port, config.host);
  if (deps.cluster) deps.cluster.listening(port);
  // On the gateway's own thread (heap-thread.ts), the young generation it was given.
  else log.info({ port, youngGenerationMb: resourceLimits.maxYoungGenerationSizeMb ?? null }, 'gateway listening');

  let closing: Promise<void> | undefined;
  return {
    port,
    close: () =>
      (closing ??= (async () => {
        await drain(server, config.shutdownTimeoutMs);
        await authCache.close();
        await json.close();
        await closeQueues([eventsQueue], redis);
        log.info('gateway stopped');
      })()),
  };
}
