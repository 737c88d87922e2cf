import http from 'node:http';
import { resourceLimits } from 'node:worker_threads';
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Config } from '../platform/config.ts';
import { createJsonPool } from '../platform/json-pool.ts';
import { JSON_TASKS } from './json-tasks.ts';
import { drainable, listen } from '../platform/listen.ts';
import { poolOf, type Db } from '../platform/db.ts';
import type { Logger } from '../platform/logger.ts';
import { allPartitions, authCacheChannels, closeQueues } from '../platform/queues.ts';
import { createEventsQueues } from '../events/jobs.ts';
import { createRedis } from '../platform/redis.ts';
import { memorySource, watchRedisMemory } from '../platform/redis-memory.ts';
import { createApp } from './app.ts';
import { createAuthCache } from './auth-cache.ts';
import { createSuppressions } from './suppressions.ts';
import { liveFlushChannels, suppressionChannels } from '../platform/queue-keys.ts';
import { answerInJson } from './client-error.ts';
import { createEventBatcher } from './event-batcher.ts';
import { createIdentifyBatcher } from './handlers/identify.ts';
import { createProfileReader } from '../profiles/profile-reader.ts';
import { createReadRoute } from '../platform/read-replica.ts';
import { createGatewayMetrics } from './metrics/gateway-metrics.ts';
import { createAdmission } from './admission.ts';
import { createUploadWatch } from './upload-watch.ts';
import { createLiveRecorder } from './live/recorder.ts';
import { createRefusedRecorder } from './live/refused-recorder.ts';
import { flushOnErasure } from './live/flush-on-erasure.ts';
import { createTrustedClock } from '../platform/trusted-clock.ts';
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
  const eventsQueues = createEventsQueues(config, redis);
  for (const queue of eventsQueues) queue.on('error', (err) => log.warn({ err: err.message, queue: queue.name }, 'events queue'));
  const authCache = createAuthCache({
    db,
    subscriber,
    publisher: redis,
    channels: authCacheChannels(config),
    ttlMs: config.keyCacheTtlMs,
    staleMaxMs: config.keyCacheStaleMaxMs,
    maxBytes: config.keyCacheMb * 1_048_576,
    log,
  });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const admission = createAdmission({
    inFlight: config.maxInFlight,
    inFlightPerEnvironment: config.maxInFlightPerEnvironment,
    uploads: config.maxUploads,
    uploadsPerEnvironment: config.maxUploadsPerEnvironment,
  });
  const uploadWatch = createUploadWatch({ graceMs: config.bodyTimeoutMs, minBytesPerSecond: config.bodyMinBytesPerSecond }, admission.prune);
  const memory = watchRedisMemory(memorySource(redis), { intervalMs: config.redisMemoryCheckMs, highWaterPercent: config.redisHighWaterPercent, log });
  const readersInFlight = Math.max(2, config.databasePoolSize - config.identifyBatchesInFlight - 1);
  const readRoute = createReadRoute({
    primary: poolOf(db),
    replicaUrl: config.databaseReadUrl,
    maxLagMs: config.readReplicaMaxLagMs,
    poolSize: readersInFlight,
    log,
  });
  const metrics = createGatewayMetrics({
    registry,
    eventsQueue: allPartitions(eventsQueues),
    readRoute,
    admission,
    uploadWatch,
    memory,
    queueScrapeTimeoutMs: 1000,
    partitions: () => batcher.partitions(),
  });

  const batcher = createEventBatcher(eventsQueues, {
    replicaAcks: { replicas: config.redisMinReplicaAcks, connection: redis },
    maxBatch: config.trackBatchMax,
    maxBytes: config.trackBatchBytes,
    timeoutMs: config.enqueueTimeoutMs,
    onBatch: metrics.observeBatch,
    memory,
    log,
  });
  const suppressions = createSuppressions({
    pool: poolOf(db),
    subscriber,
    publisher: redis,
    channels: suppressionChannels(config),
    refreshMs: config.suppressionRefreshMs,
    counter: metrics.suppressed,
    log,
  });
  const json = createJsonPool(JSON_TASKS, { threads: deps.cluster?.jsonThreads });
  // The dashboard's live view: Identify calls and the answers' rates, written to Redis off the request path.
  const live = createLiveRecorder({ config, redis, requestTotals: metrics.requestTotals, log });
  // The console's Refused calls page: a sampled record of the 4xx answers, written the same way.
  const refused = createRefusedRecorder({ config, redis, log });
  flushOnErasure({
    subscriber,
    publisher: redis,
    channels: liveFlushChannels(config),
    flush: async () => void (await Promise.all([live.flush(), refused.flush()])),
    log,
  });
  const identifyBatcher = createIdentifyBatcher(poolOf(db), json, {
    maxBatch: config.identifyBatchMax,
    maxInFlight: config.identifyBatchesInFlight,
    overlapMs: config.identifyBatchOverlapMs,
    cacheMb: config.identifyCacheMb,
    addressHistoryDays: config.addressHistoryDays,
    onCommitted: live.identifyCommitted,
    onDropped: suppressions.countDropped,
  });
  // Reads hold a connection for one statement: up to the pool less what Identify's batches use
  // (at least two, so one slow read, say a connection attempt to a stalled server, does not
  // hold every other read for its whole timeout).
  const profileReader = createProfileReader(poolOf(db), { maxBatch: 256, maxInFlight: readersInFlight }, readRoute);
  const scraped = deps.cluster ? deps.cluster.shareMetrics(registry) : registry;
  // Receipt times on PostgreSQL's clock, as the workers' partitions and an erasure's time are.
  const clock = await createTrustedClock(poolOf(db), log);
  const app = createApp({
    clock,
    config,
    db,
    redis,
    memory,
    batcher,
    identifyBatcher,
    profileReader,
    authCache,
    suppressions,
    metrics: scraped,
    admission,
    uploadWatch,
    observeRequest: metrics.observeRequest,
    observeRefused: config.refusedCallsKept > 0 ? refused.refused : undefined,
    log,
    json,
  });
  // Node enforces the two timeouts below only when it sweeps connections (every 30 s by default),
  // which would let a stalled client hold its connection for up to 40 s instead of 10.
  const server = http.createServer({ connectionsCheckingInterval: 1000, maxHeaderSize: config.maxHeaderBytes, requireHostHeader: false });
  // What Node would answer itself (a parse error, an unknown Expect, no Host) gets a JSON error too.
  answerInJson(server, app.callback());
  // A client that sends its request and then closes its side (shutdown(SHUT_WR), `nc -N`) still
  // gets the answer; by default Node drops the request's response when the client's FIN arrives.
  (server as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  // Slow or stalled clients cannot hold a connection (and its buffers) for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 65_000;

  const port = await listen(server, config.port, config.host);
  if (deps.cluster) deps.cluster.listening(port);
  // On the gateway's own thread (heap-thread.ts), the heap it was given; null on a main thread, whose heap node sets from its flags.
  else
    log.info(
      { port, youngGenerationMb: resourceLimits.maxYoungGenerationSizeMb ?? null, oldGenerationMb: resourceLimits.maxOldGenerationSizeMb ?? null },
      'gateway listening',
    );

  return drainable(server, port, config.shutdownTimeoutMs, async () => {
    batcher.close();
    uploadWatch.close();
    await live.close();
    await refused.close();
    await suppressions.close();
    await authCache.close();
    await json.close();
    memory.close();
    await readRoute.close();
    clock.close();
    await closeQueues(eventsQueues, redis);
    log.info('gateway stopped');
  });
}
