import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';

export type Db = PrismaClient;
/** The client inside `db.$transaction(async (tx) => …)`. */
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

/**
 * A transaction PostgreSQL rolled back for a deadlock or a serialization failure: Prisma's
 * P2034, or, from a raw query, P2010 with the driver's 40P01 / 40001 (node-postgres: the code itself).
 */
export function isWriteConflict(err: unknown): boolean {
  const e = err as { code?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | null;
  if (e?.code === 'P2034' || e?.code === '40P01' || e?.code === '40001') return true;
  const original = e?.meta?.driverAdapterError?.cause?.originalCode;
  return e?.code === 'P2010' && (original === '40P01' || original === '40001');
}

type DriverError = {
  code?: unknown;
  message?: unknown;
  meta?: { driverAdapterError?: { cause?: { originalCode?: unknown; originalMessage?: unknown } } };
} | null;

/** PostgreSQL's SQLSTATE for a failed raw query (Prisma's P2010 carries the driver's), or null when it never got an answer. */
export function sqlState(err: unknown): string | null {
  const code = (err as DriverError)?.meta?.driverAdapterError?.cause?.originalCode;
  return typeof code === 'string' ? code : null;
}

/**
 * PostgreSQL refused a statement for the data it carried: a data exception (22), a constraint
 * or trigger check (23), a trigger's RAISE (P0), or a limit such as an index row too large (54).
 * Sending the same rows again would fail the same way; anything else may pass on a retry.
 */
export function isDataError(err: unknown): boolean {
  return /^(22|23|54|P0)/.test(sqlState(err) ?? '');
}

/** The database's own words for a failed query (`23514: new row … violates check constraint …`), without Prisma's invocation text. */
export function dbErrorMessage(err: unknown): string {
  const cause = (err as DriverError)?.meta?.driverAdapterError?.cause;
  if (typeof cause?.originalMessage === 'string') return `${String(cause.originalCode)}: ${cause.originalMessage}`;
  return err instanceof Error ? err.message : String(err);
}

/** Runs `work` again, after a short random pause, when PostgreSQL rolled it back for a write conflict. */
export async function retryWriteConflicts<T>(work: () => Promise<T>, attempts = 4): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (err) {
      if (attempt >= attempts || !isWriteConflict(err)) throw err;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 20 * attempt));
    }
  }
}

const pools = new WeakMap<Db, pg.Pool>();

/**
 * The node-postgres pool under a client made by createDb. The hot paths (Identify's batches,
 * Profiles reads) query it directly: Prisma's adapter costs several times a statement's own
 * client work (README, Performance), and they need no more than text in, rows out.
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
    // (a huge call, a lock wait) went on burning a server core for minutes.
    statement_timeout: QUERY_TIMEOUT_MS,
    keepAlive: true,
    // Statements a caller sends without awaiting each go out together (common/pipeline.ts):
    // Identify's batch is two round trips instead of four. A caller that awaits each statement
    // sees no difference.
    pipeline: true,
  });
  // An idle client losing its server emits on the pool; unhandled, that kills the process.
  pool.on('error', (err) => log?.warn({ err: err.message }, 'postgres connection lost'));
  // disposeExternalPool: $disconnect() also closes the pool, so a process can exit at once.
  const db = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(db, pool);
  return db;
}
