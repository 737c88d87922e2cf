// The system under test of one seed: its own PostgreSQL primary and replica, its own Redis
// Cluster, two gateways and two workers, two organizations with a key each and a published
// journey, everything on one fake clock. Everything started here registers with the cleanup
// registry, which stops it at the end of the seed, on a failure or on Ctrl-C.
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort } from '../test/helpers/free-port.ts';
import { startRedisCluster, type OwnCluster } from '../test/helpers/redis-cluster.ts';
import { runFromBuild } from './compiled.ts';
import { onCleanup } from './cleanup.ts';
import { FakeClock } from './clock.ts';
import { runIntake, runIntakeJson } from './commands.ts';
import type { Org } from './history.ts';
import { IntakeProcess } from './intake-process.ts';
import { queryOnce, startPostgres, type OwnPostgres } from './postgres.ts';

export const DATABASE = 'intake_chaos';
/** Events are kept one day: a clock move of two days passes the retention within a run. */
export const RETENTION_DAYS = 1;
export const ORG_SLUGS: Record<Org, string> = { a: 'chaos-a', b: 'chaos-b' };
export const JOIN_BY_EMAIL: Record<Org, boolean> = { a: true, b: false };

export interface OrgAccess {
  slug: string;
  key: string;
  environmentId: string;
}

export interface System {
  dir: string;
  logDir: string;
  clock: FakeClock;
  pg: OwnPostgres;
  redis: OwnCluster;
  queuePrefix: string;
  gateways: IntakeProcess[];
  workers: IntakeProcess[];
  orgs: Record<Org, OrgAccess>;
  /** The environment of every intake process and command of the run. */
  env: Record<string, string>;
}

/** Settings of every process, each as docs/configuration.md describes it; ports are added per process. */
function intakeEnv(pg: OwnPostgres, redis: OwnCluster, clock: FakeClock, queuePrefix: string): Record<string, string> {
  return {
    ...clock.env(),
    DATABASE_URL: pg.primaryUrl(DATABASE),
    DATABASE_READ_URL: pg.replicaUrl(DATABASE),
    // Short, so that in the replica step (primary idle for longer) a gateway that judged the
    // replica by when the primary last wrote, rather than by what the replica holds, would stop
    // reading from it.
    READ_REPLICA_MAX_LAG_MS: '2000',
    DATABASE_POOL_SIZE: '5',
    // REDIS_CLUSTER_NODES takes the place of REDIS_URL's host; the URL still has to be valid.
    REDIS_URL: `redis://${redis.nodes.split(',')[0]}`,
    REDIS_CLUSTER_NODES: redis.nodes,
    QUEUE_PARTITIONS: '3',
    // A killed master loses nothing answered 202: every batch is on its replica first (reliability.md).
    REDIS_MIN_REPLICA_ACKS: '1',
    QUEUE_PREFIX: queuePrefix,
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    GATEWAY_PROCESSES: '1',
    EVENTS_RETENTION_DAYS: String(RETENTION_DAYS),
    STORAGE_MAINTENANCE_MS: '2000',
    // The fewest days ahead there may be: a three-day clock move with the maintenance held off
    // leaves the workers a day without its partition to make (clock-steps.ts).
    EVENT_PARTITIONS_AHEAD_DAYS: '2',
    // Far beyond the clock moves of the longest run: Identify retries stay duplicates.
    IDENTIFY_IDEMPOTENCY_DAYS: '3650',
    // A killed worker's batches come back within seconds, and a batch that failed during a fault is retried soon.
    WORKER_LOCK_MS: '5000',
    JOB_BACKOFF_MS: '500',
    INTAKE_ENV_FILE: '',
  };
}

export async function startSystem(options: { seed: number; dir: string; logDir: string; locales: string; build: string }): Promise<System> {
  const { seed, dir, logDir, locales, build } = options;
  mkdirSync(logDir, { recursive: true });
  const clock = new FakeClock(path.join(dir, 'clock'));
  // Both are waited for even when one fails, so that the other is registered for cleanup before the failure is thrown.
  const [pgStarted, redisStarted] = await Promise.allSettled([
    startPostgres({ dir, locales, clockEnv: clock.env() }),
    startRedisCluster().then((cluster) => {
      onCleanup(
        'Redis Cluster',
        () => cluster.close(),
        () => {
          for (const node of cluster.all)
            try {
              process.kill(node.pid(), 'SIGKILL');
            } catch {
              // Gone already.
            }
        },
      );
      return cluster;
    }),
  ]);
  if (pgStarted.status === 'rejected') throw pgStarted.reason;
  if (redisStarted.status === 'rejected') throw redisStarted.reason;
  const [pg, redis] = [pgStarted.value, redisStarted.value];
  const queuePrefix = `chaos-${seed}-${randomBytes(4).toString('hex')}`;
  const env = { ...intakeEnv(pg, redis, clock, queuePrefix), ...runFromBuild(build) };

  const migrated = await runIntake(['migrate'], env);
  if (migrated.exitCode !== 0) throw new Error(`intake migrate exited ${migrated.exitCode}: ${migrated.stderr.trim()}`);
  const journey = path.join(dir, 'journey.json');
  writeFileSync(
    journey,
    JSON.stringify({ name: 'Chaos welcome', entry: { event: 'Signed Up' }, steps: [{ send: { channel: 'email', template: 'welcome' } }], reentry: true }),
  );
  const orgs = {} as Record<Org, OrgAccess>;
  for (const org of ['a', 'b'] as const) {
    const slug = ORG_SLUGS[org];
    await runIntakeJson(['org', 'create', slug, ...(JOIN_BY_EMAIL[org] ? ['--features', 'join-by-email'] : [])], env);
    const { key } = await runIntakeJson<{ key: string }>(['key', 'create', slug], env);
    const { id } = await runIntakeJson<{ id: string }>(['journey', 'create', slug, '--file', journey], env);
    await runIntakeJson(['journey', 'publish', slug, id], env);
    const [row] = await queryOnce<{ id: string }>(pg.primaryUrl(DATABASE), 'SELECT id::text FROM environments WHERE path_value = $1', [slug]);
    orgs[org] = { slug, key, environmentId: row.id };
  }

  const spawnAll = async (role: 'gateway' | 'worker') =>
    Promise.all(
      [1, 2].map(async (i) => {
        const port = await freePort();
        const ports = role === 'gateway' ? { PORT: String(port), WORKER_METRICS_PORT: '0' } : { WORKER_METRICS_PORT: String(port), PORT: '0' };
        const p = new IntakeProcess(`${role}-${i}`, role, port, { ...env, ...ports }, path.join(logDir, `${role}-${i}.log`));
        await p.start();
        return p;
      }),
    );
  const [gateways, workers] = await Promise.all([spawnAll('gateway'), spawnAll('worker')]);
  return {
    dir,
    logDir,
    clock,
    pg,
    redis,
    queuePrefix,
    gateways,
    workers,
    orgs,
    env,
  };
}
