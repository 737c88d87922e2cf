import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';

export type Db = PrismaClient;
/** The client inside `db.$transaction(async (tx) => …)`. */
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/**
 * A transaction PostgreSQL rolled back for a deadlock or a serialization failure (40P01,
 * 40001; Prisma's own P2034 for its interactive transactions).
 */
export function isWriteConflict(err: unknown): boolean {
  const state = sqlState(err);
  return state === '40P01' || state === '40001' || (err as DriverError)?.code === 'P2034';
}

type DriverError = {
  code?: unknown;
  severity?: unknown;
  message?: unknown;
  meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; originalMessage?: unknown } } };
} | null;

/** node-postgres's error for a statement PostgreSQL refused: its SQLSTATE in `code`, with a severity. */
function pgRefusal(err: unknown): { code: string; message: string } | null {
  const e = err as { code?: unknown; severity?: unknown; message?: unknown } | null;
  return typeof e?.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) && typeof e.severity === 'string' && typeof e.message === 'string'
    ? { code: e.code, message: e.message }
    : null;
}

/** PostgreSQL's SQLSTATE for a failed raw query (Prisma's P2010 carries the driver's; node-postgres's own error has it), or null when it never got an answer. */
export function sqlState(err: unknown): string | null {
  const code = (err as DriverError)?.meta?.driverAdapterError?.cause?.originalCode;
  return typeof code === 'string' ? code : (pgRefusal(err)?.code ?? null);
}

/**
 * PostgreSQL refused a statement for the data it carried: a cardinality violation (21: one
 * statement touching a row twice), a data exception (22), a constraint or trigger check (23), a
 * trigger's RAISE (P0), or a limit such as an index row too large (54). Sending the same rows
 * again would fail the same way, so a batch is split to isolate them; anything else (the
 * connection, a timeout, a conflict, the server's state) may pass on a retry and fails the whole.
 */
export function isDataError(err: unknown): boolean {
  return /^(21|22|23|54|P0)/.test(sqlState(err) ?? '');
}

/**
 * PostgreSQL found no partition of the partitioned table `table` for a row (ExecFindPartition):
 * SQLSTATE 23514 with the error's table field naming `table` itself and no constraint. A CHECK
 * violation has the same SQLSTATE but names its constraint (and the partition the row reached),
 * and the message is in the server's lc_messages: the fields tell them apart, the words cannot.
 * Only node-postgres's own error has those fields (Prisma's adapter keeps the SQLSTATE and the
 * message alone), so a refusal that came through Prisma is never taken for this one.
 */
export function isNoPartitionFor(err: unknown, table: string): boolean {
  const e = err as { table?: unknown; constraint?: unknown } | null;
  return pgRefusal(err)?.code === '23514' && e?.table === table && e?.constraint === undefined;
}

/**
 * Applies `apply` to all of `items` at once; when it throws an error `refused` accepts (by default
 * isDataError), the items are halved in order, the first half done before the second starts,
 * until each refused item stands alone with that error as its outcome: one bad item costs about
 * 2·log2(n) calls and fails alone. Any other error is thrown.
 */
export async function splitOnRefusal<T, R>(items: T[], apply: (part: T[]) => Promise<R[]>, refused = isDataError): Promise<(R | Error)[]> {
  if (!items.length) return [];
  try {
    return await apply(items);
  } catch (err) {
    if (!refused(err)) throw err;
    if (items.length === 1) return [err as Error];
  }
  const half = Math.ceil(items.length / 2);
  const first = await splitOnRefusal(items.slice(0, half), apply, refused);
  return first.concat(await splitOnRefusal(items.slice(half), apply, refused));
}

/** The database's own words for a failed query (`23514: new row … violates check constraint …`), without Prisma's invocation text. */
export function dbErrorMessage(err: unknown): string {
  const cause = (err as DriverError)?.meta?.driverAdapterError?.cause;
  if (typeof cause?.originalMessage === 'string') return `${String(cause.originalCode)}: ${cause.originalMessage}`;
  const refusal = pgRefusal(err);
  if (refusal) return `${refusal.code}: ${refusal.message}`;
  return err instanceof Error ? err.message : String(err);
}

/**
 * Runs `work` again when it failed with an error `retryable` accepts (a write conflict, say),
 * up to `attempts` tries, after a random pause of up to `pauseMs` × the attempt: the jitter keeps
 * two transactions that collided from colliding again in step.
 */
export async function retrying<T>(work: () => Promise<T>, attempts: number, retryable: (err: unknown) => boolean, pauseMs = 10): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (attempt >= attempts || !retryable(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * pauseMs * attempt));
    }
  }
}

const pools = new WeakMap<Db, pg.Pool>();

/**
 * The node-postgres pool under a client made by createDb. The hot paths (Identify's batches,
 * Profiles reads) query it directly: Prisma's adapter costs several times a statement's own
 * client work (docs/architecture.md), and they need no more than text in, rows out.
 */
export function poolOf(db: Db): pg.Pool {
  const pool = pools.get(db);
  if (!pool) throw new Error('poolOf: a client made by createDb is needed');
  return pool;
}

/** Every statement's bound, client and server side (a larger one is set where a statement carries megabytes). */
export const QUERY_TIMEOUT_MS = 5000;

/** Below this many characters a statement keeps QUERY_TIMEOUT_MS (and needs no SET LOCAL round trip). */
export const LARGE_STATEMENT_CHARS = 256 * 1024;

/**
 * The bound of a statement that carries `chars` characters of text: QUERY_TIMEOUT_MS, plus 5 s
 * a megabyte past LARGE_STATEMENT_CHARS (a multi-MB Identify's write took over 5 s on a loaded
 * machine and answered 500).
 */
export function queryTimeoutFor(chars: number): number {
  if (chars <= LARGE_STATEMENT_CHARS) return QUERY_TIMEOUT_MS;
  return QUERY_TIMEOUT_MS + Math.ceil((chars / 1_000_000) * 5000);
}

/**
 * `config` with a client-side bound of its own, instead of the pool's. node-postgres reads a
 * query's own `query_timeout` (Client.query, lib/client.js) though its typings list it only for
 * the client: this project's one reliance on its internals, pinned by test/unit/pg-adapter.test.ts.
 */
export function withQueryTimeout(config: pg.QueryConfig, ms: number): pg.QueryConfig {
  return { ...config, query_timeout: ms } as pg.QueryConfig;
}

/**
 * A worker's connections for holding locks across other statements (the erasure guard,
 * events/erasure-guard.ts): apart from createDb's pool, since the work done under the lock needs
 * those. A lock wait may last an erasure's time (seconds), so the bound is a minute.
 */
export function createLockPool(config: Pick<Config, 'databaseUrl'>, max: number, log?: Logger): pg.Pool {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max,
    connectionTimeoutMillis: 3000,
    query_timeout: 60_000,
    statement_timeout: 60_000,
    keepAlive: true,
    pipeline: true,
  } as pg.PoolConfig);
  onConnectionLost(pool, log, 'postgres connection lost');
  return pool;
}

/**
 * A pool's lost connections are logged, never thrown. node-postgres emits the loss of an idle
 * connection on the pool, and of a checked-out one (a transaction between statements, a lock
 * held across work) on the client alone, where no listener would make it an uncaught error
 * that ends the process; that caller's next statement fails instead.
 */
export function onConnectionLost(pool: pg.Pool, log: Logger | undefined, message: string): void {
  pool.on('error', (err) => log?.warn({ err: err.message }, message));
  pool.on('connect', (client) => client.on('error', () => {}));
}

/** One client and one pool per process. */
export function createDb(config: Pick<Config, 'databaseUrl' | 'databasePoolSize'>, log?: Logger): Db {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.databasePoolSize,
    // While PostgreSQL is unreachable callers fail within seconds instead of queueing forever.
    connectionTimeoutMillis: 3000,
    // A server (or network) that hangs on an open connection: the caller gets its 500 within
    // about 5 s rather than after a typical client's own timeout. Every request's query is small.
    query_timeout: QUERY_TIMEOUT_MS,
    // ...and PostgreSQL stops the statement too: without it a statement the client gave up on
    // (a huge call, a lock wait) would go on burning a server core for minutes.
    statement_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
    // Statements a caller sends without awaiting each go out together (platform/pipeline.ts):
    // Identify's batch is two round trips instead of four. A caller that awaits each statement
    // sees no difference.
    pipeline: true,
  });
  onConnectionLost(pool, log, 'postgres connection lost');
  // disposeExternalPool: $disconnect() also closes the pool, so a process can exit at once.
  const db = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(db, pool);
  return db;
}
