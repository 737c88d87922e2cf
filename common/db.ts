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
 * P2034, or, from a raw query, P2010 with the driver's 40P01 / 40001.
 */
export function isWriteConflict(err: unknown): boolean {
  const e = err as { code?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | null;
  if (e?.code === 'P2034') return true;
  const original = e?.meta?.driverAdapterError?.cause?.originalCode;
  return e?.code === 'P2010' && (original === '40P01' || original === '40001');
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

/** One client and one pool per process. */
export function createDb(config: Pick<Config, 'databaseUrl' | 'databasePoolSize'>, log?: Logger): Db {
  const pool = new pg.Pool({
    connectionString: config.databaseUrl,
    max: config.databasePoolSize,
    // While PostgreSQL is unreachable callers fail within seconds instead of queueing forever.
    connectionTimeoutMillis: 3000,
    // A server (or network) that hangs on an open connection: the caller gets its 500 within
    // about 5 s rather than after a typical client's own timeout. Every request's query is small.
    query_timeout: 5000,
    keepAlive: true,
  });
  // An idle client losing its server emits on the pool; unhandled, that kills the process.
  pool.on('error', (err) => log?.warn({ err: err.message }, 'postgres connection lost'));
  // disposeExternalPool: $disconnect() also closes the pool, so a process can exit at once.
  return new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
}
