import pg from 'pg';
import { PrismaPg } from '@prisma/adapter-pg';
import { PrismaClient } from './generated/prisma/client.ts';
import type { Config } from './config.ts';
import type { Logger } from './logger.ts';

export type Db = PrismaClient;
/** The client inside `db.$transaction(async (tx) => …)`. */
export type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

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
