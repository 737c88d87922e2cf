// Configuration comes from environment variables only. Each one has a default, a doc
// line (README's table is generated from the same list) and a parser; every bad value
// is reported at once at start.
import { availableParallelism } from 'node:os';

type Parser<T> = (raw: string) => T;

interface Setting<T> {
  env: string;
  default: string;
  doc: string;
  parse: Parser<T>;
}

const int =
  (min: number, max = Number.MAX_SAFE_INTEGER): Parser<number> =>
  (raw) => {
    // Digits only: an empty value (an unset `${VAR}` in compose, a blank line in .env) is not 0.
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) throw new Error(`must be an integer from ${min} to ${max}`);
    return n;
  };
const text: Parser<string> = (raw) => raw;
const nonEmpty: Parser<string> = (raw) => {
  if (!raw.trim()) throw new Error('must not be empty');
  return raw;
};
const url =
  (protocols: string[]): Parser<string> =>
  (raw) => {
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new Error('must be a URL');
    }
    if (!protocols.includes(parsed.protocol)) throw new Error(`must start with ${protocols.join(' or ')}//`);
    // A socket directory in `?host=` (libpq's form) counts as a host.
    if (!parsed.hostname && !parsed.searchParams.get('host')) throw new Error('must name a host');
    return raw;
  };
const oneOf =
  <T extends string>(...values: T[]): Parser<T> =>
  (raw) => {
    if (!values.includes(raw as T)) throw new Error(`must be one of ${values.join(', ')}`);
    return raw as T;
  };
const bool: Parser<boolean> = (raw) => {
  if (raw !== 'true' && raw !== 'false') throw new Error('must be true or false');
  return raw === 'true';
};

/** A count, or `auto`: one per core this process may run on. */
const countOrAuto =
  (max: number): Parser<number> =>
  (raw) => {
    if (raw === 'auto') return availableParallelism();
    try {
      return int(1, max)(raw);
    } catch {
      throw new Error(`must be auto or an integer from 1 to ${max}`);
    }
  };

const settings = {
  databaseUrl: {
    env: 'DATABASE_URL',
    default: 'postgresql://postgres@127.0.0.1:5432/intake',
    doc: 'PostgreSQL connection string',
    parse: url(['postgresql:', 'postgres:']),
  },
  databasePoolSize: {
    env: 'DATABASE_POOL_SIZE',
    default: '10',
    doc: 'PostgreSQL connections of each intake process; of a whole `intake gateway`, however many processes it runs (GATEWAY_PROCESSES: each takes its share, rounded up)',
    parse: int(1, 500),
  },
  redisUrl: {
    env: 'REDIS_URL',
    default: 'redis://127.0.0.1:6379',
    doc: 'Redis connection string (BullMQ queues, key-cache invalidation)',
    parse: url(['redis:', 'rediss:']),
  },
  queuePrefix: { env: 'QUEUE_PREFIX', default: 'intake', doc: 'Redis key prefix of the BullMQ queues', parse: nonEmpty },
  port: { env: 'PORT', default: '3000', doc: 'gateway HTTP port', parse: int(0, 65535) },
  gatewayProcesses: {
    env: 'GATEWAY_PROCESSES',
    default: '1',
    doc: "processes of one `intake gateway`, sharing its port (node:cluster) so that it uses more than one core, for a host where the gateway runs alone: `auto` = one per CPU it may run on (`os.availableParallelism()`, which does not see a container's CPU quota), 1 = a single process, no cluster. `intake dev` runs one. DATABASE_POOL_SIZE, MAX_IN_FLIGHT and IDENTIFY_BATCHES_IN_FLIGHT stay per gateway: each process takes its share, rounded up",
    parse: countOrAuto(256),
  },
  gatewaySemiSpaceMb: {
    env: 'GATEWAY_SEMI_SPACE_MB',
    default: '32',
    doc: "the gateway's young generation: V8's semi-space in MB, like node's `--max-semi-space-size` (its default is 16). `intake gateway` runs its gateway on a thread of its own process whose heap is made this size (a running process cannot resize its own); 0 = on the main thread with node's default. With GATEWAY_PROCESSES > 1 each process gets it as that node flag",
    parse: int(0, 1024),
  },
  host: { env: 'HOST', default: '0.0.0.0', doc: 'listen address of the gateway and the dashboard', parse: nonEmpty },
  enqueueTimeoutMs: {
    env: 'ENQUEUE_TIMEOUT_MS',
    default: '2000',
    doc: 'Track answers 503 when the Redis enqueue takes longer than this',
    parse: int(10, 60_000),
  },
  trackBatchMax: {
    env: 'TRACK_BATCH_MAX',
    default: '256',
    doc: 'most Track events in one queue job (group commit: the requests that arrive together become one BullMQ job)',
    parse: int(1, 10_000),
  },
  trackBatchBytes: {
    env: 'TRACK_BATCH_BYTES',
    default: '4194304',
    doc: 'most payload bytes in one Track queue job (a job always takes at least one event, so a job stays under this plus 1 MiB)',
    parse: int(1024, 64 * 1_048_576),
  },
  identifyBatchMax: {
    env: 'IDENTIFY_BATCH_MAX',
    default: '64',
    doc: 'most Identify calls applied in one PostgreSQL transaction (group commit of the calls that arrive together)',
    parse: int(1, 10_000),
  },
  identifyBatchesInFlight: {
    env: 'IDENTIFY_BATCHES_IN_FLIGHT',
    default: '3',
    doc: 'Identify batches one gateway applies at once; later calls wait and go together in the next batch (at most DATABASE_POOL_SIZE is useful)',
    parse: int(1, 500),
  },
  identifyBatchOverlapMs: {
    env: 'IDENTIFY_BATCH_OVERLAP_MS',
    default: '10',
    doc: 'a further Identify batch starts beside running ones only once the latest of them has run this long (0: as soon as calls wait): a steady load forms one large batch at a time, and a slow batch holds the others up no longer than this',
    parse: int(0, 60_000),
  },
  identifyCacheMb: {
    env: 'IDENTIFY_CACHE_MB',
    default: '64',
    doc: "profiles a gateway keeps from its last Identify writes (MB of their traits' text): a batch of them is applied in one round trip, on the condition that no one changed them since (else it takes the locked path); 0 = every batch takes the locked path",
    parse: int(0, 65_536),
  },
  keyCacheTtlMs: {
    env: 'KEY_CACHE_TTL_MS',
    default: '30000',
    doc: 'how long a gateway trusts a cached API-key lookup; revocations reach every gateway at once through Redis regardless',
    parse: int(0, 3_600_000),
  },
  trackRawBodyLimit: {
    env: 'TRACK_RAW_BODY_LIMIT',
    default: '1048576',
    doc: 'raw Track bodies beyond this many bytes are refused with 413 before they are read whole or parsed; at most 1 MiB, the event limit, whose measure counts more than the raw body',
    parse: int(65_536, 1_048_576),
  },
  identifyBodyLimit: {
    env: 'IDENTIFY_BODY_LIMIT',
    default: '5242880',
    doc: 'raw Identify bodies beyond this many bytes are refused (the spec sets no Identify limit; this is a memory guard)',
    parse: int(65_536),
  },
  maxHeaderBytes: {
    env: 'HTTP_MAX_HEADER_BYTES',
    default: '1048576',
    doc: 'most bytes of a request line and headers (a Profiles URL carries the whole user ID, of any length); beyond it 431',
    parse: int(16_384, 16_777_216),
  },
  maxInFlight: {
    env: 'MAX_IN_FLIGHT',
    default: '1000',
    doc: 'Identify, Track and Profiles requests one gateway handles at once; beyond it a request is refused at once with 429 and Retry-After',
    parse: int(1, 1_000_000),
  },
  workerConcurrency: {
    env: 'WORKER_CONCURRENCY',
    default: '16',
    doc: 'batch jobs one worker process handles at once (their rows share INSERTs of up to WORKER_BATCH_MAX rows)',
    parse: int(1, 5000),
  },
  workerBatchMax: { env: 'WORKER_BATCH_MAX', default: '500', doc: 'most events one INSERT stores', parse: int(1, 10_000) },
  workerMetricsPort: {
    env: 'WORKER_METRICS_PORT',
    default: '9100',
    doc: 'a worker process serves GET /metrics and /healthz here (0: any free port); if the port is taken it runs without',
    parse: int(0, 65535),
  },
  journeyGraceMs: {
    env: 'JOURNEY_GRACE_MS',
    default: '2500',
    doc: "journeys move on only up to this long before the oldest event still on its way; at least ENQUEUE_TIMEOUT_MS, so every event answered 202 is waited for (covers the gateway's enqueue and clock differences)",
    parse: int(0, 60_000),
  },
  journeyTickMs: {
    env: 'JOURNEY_TICK_MS',
    default: '200',
    doc: 'how often a worker looks for journey delays and waits that are due',
    parse: int(10, 60_000),
  },
  workerBatchWaitMs: {
    env: 'WORKER_BATCH_WAIT_MS',
    default: '5',
    doc: 'how long a worker waits for more events before inserting a batch',
    parse: int(0, 1000),
  },
  workerLockMs: {
    env: 'WORKER_LOCK_MS',
    default: '15000',
    doc: "job lock; a killed worker's jobs go back to the queue after about this long",
    parse: int(1000, 600_000),
  },
  jobAttempts: {
    env: 'JOB_ATTEMPTS',
    default: '12',
    doc: 'attempts per job before it is marked failed (exponential backoff between them)',
    parse: int(1, 100),
  },
  jobBackoffMs: { env: 'JOB_BACKOFF_MS', default: '1000', doc: 'first retry delay; doubles on each attempt', parse: int(1, 600_000) },
  shutdownTimeoutMs: {
    env: 'SHUTDOWN_TIMEOUT_MS',
    default: '10000',
    doc: 'on SIGTERM, how long to wait for in-flight requests and jobs',
    parse: int(0, 600_000),
  },
  dashboardPort: { env: 'DASHBOARD_PORT', default: '3001', doc: 'queue dashboard (`intake dashboard`) HTTP port', parse: int(0, 65535) },
  dashboardUser: {
    env: 'DASHBOARD_USER',
    default: 'admin',
    doc: 'dashboard basic-auth user',
    // Basic auth joins user and password with ':', so a user containing one could not be told apart.
    parse: (raw) => {
      if (!raw || raw.includes(':')) throw new Error("must be non-empty and contain no ':'");
      return raw;
    },
  },
  dashboardPassword: {
    env: 'DASHBOARD_PASSWORD',
    default: '',
    doc: 'dashboard basic-auth password; when empty the dashboard is open to anyone who reaches its port (a warning is logged)',
    parse: text,
  },
  dashboardReadOnly: {
    env: 'DASHBOARD_READ_ONLY',
    default: 'true',
    doc: '`false` lets the dashboard retry, remove, add and pause jobs and queues; otherwise it only shows them',
    parse: bool,
  },
  logLevel: { env: 'LOG_LEVEL', default: 'info', doc: 'pino log level', parse: oneOf('fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent') },
} satisfies Record<string, Setting<unknown>>;

type Settings = typeof settings;
export type Config = { [K in keyof Settings]: ReturnType<Settings[K]['parse']> };

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, s] of Object.entries(settings) as [string, Setting<unknown>][]) {
    const raw = env[s.env] ?? s.default;
    try {
      out[name] = s.parse(raw);
    } catch (err) {
      problems.push(`${s.env}=${JSON.stringify(raw)}: ${(err as Error).message}`);
    }
  }
  if (problems.length) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return out as Config;
}

/** Rows for the README's configuration table. */
export function describeConfig(): { env: string; default: string; doc: string }[] {
  return Object.values(settings).map(({ env, default: d, doc }) => ({ env, default: d, doc }));
}
