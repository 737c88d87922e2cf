// An error that comes from a setting names the setting: "cannot reach PostgreSQL" is only useful
// with the DATABASE_URL it tried (and whether that came from .env), and "database does not
// exist" with what creates it. Pure: an error and the configuration in, one line (or null) out.
import type { Config } from '../platform/config.ts';
import { redisErrorCode } from '../platform/redis-memory.ts';

interface Cause {
  kind?: unknown;
  originalCode?: unknown;
  originalMessage?: unknown;
  host?: unknown;
  port?: unknown;
  db?: unknown;
}

/** `errorCode`: Prisma's code on a PrismaClientInitializationError (its request errors have `code`). */
type Failure = Error & { code?: unknown; errorCode?: unknown; address?: unknown; port?: unknown; meta?: { driverAdapterError?: { cause?: Cause } } };

/** `host:port` of a service URL (the scheme's default port when it names none). */
function hostPort(serviceUrl: string, defaultPort: number): string {
  try {
    const url = new URL(serviceUrl);
    return `${url.hostname || url.searchParams.get('host') || 'localhost'}:${url.port || defaultPort}`;
  } catch {
    return serviceUrl;
  }
}

function databaseName(serviceUrl: string): string {
  try {
    return decodeURIComponent(new URL(serviceUrl).pathname.slice(1)) || 'postgres';
  } catch {
    return '?';
  }
}

/**
 * The one line to print for `err` when a setting is its likely cause, or null. `fromFile`: the
 * settings read from the env file (their hint says so, since that is where to change them).
 */
export function settingHint(err: unknown, config: Pick<Config, 'databaseUrl' | 'redisUrl'>, fromFile: readonly string[] = []): string | null {
  const e = err as Failure | null;
  if (!e || typeof e !== 'object') return null;
  const cause = e.meta?.driverAdapterError?.cause ?? {};
  const sqlState = typeof cause.originalCode === 'string' ? cause.originalCode : typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : null;
  const message = String(e.message ?? '');
  const setting = (name: string) => `${name}${fromFile.includes(name) ? ', set in .env' : ''}`;
  const pg = hostPort(config.databaseUrl, 5432);
  const redis = hostPort(config.redisUrl, 6379);
  const peer = typeof e.address === 'string' && e.port !== undefined ? `${e.address}:${String(e.port)}` : null;

  if (e.code === 'P1001' || e.errorCode === 'P1001' || cause.kind === 'DatabaseNotReachable' || (isConnectFailure(e) && peer === pg)) {
    return `cannot reach PostgreSQL at ${pg} (${setting('DATABASE_URL')}): is it running, and is DATABASE_URL its address?`;
  }
  if (e.code === 'P1003' || sqlState === '3D000' || cause.kind === 'DatabaseDoesNotExist') {
    const name = typeof cause.db === 'string' ? cause.db : databaseName(config.databaseUrl);
    return `database "${name}" does not exist on ${pg} (${setting('DATABASE_URL')}): run \`npx intake migrate\` (or \`npm start\`, which migrates) to create it, or point DATABASE_URL at the right one`;
  }
  if (e.code === 'P2021' || sqlState === '42P01') {
    return `the database ${databaseName(config.databaseUrl)} on ${pg} (${setting('DATABASE_URL')}) has no intake tables yet: run \`npx intake migrate\``;
  }
  if (e.code === 'P1000' || e.code === 'P1010' || sqlState === '28P01' || sqlState === '28000') {
    return `PostgreSQL at ${pg} refused the user or password of ${setting('DATABASE_URL')}: ${String(cause.originalMessage ?? lastLine(message))}`;
  }
  // Redis answers a SELECT out of range with ERR, its code for anything: the reply's text is the only signal.
  if (/DB index is out of range/.test(message)) return `Redis at ${redis} has no such database number (${setting('REDIS_URL')}): ${message}`;
  const redisCode = redisErrorCode(e);
  if (redisCode === 'NOAUTH' || redisCode === 'WRONGPASS') {
    return `Redis at ${redis} refused the credentials of ${setting('REDIS_URL')}: ${lastLine(message)}`;
  }
  if (isConnectFailure(e) && peer === redis) return `cannot reach Redis at ${redis} (${setting('REDIS_URL')}): is it running, and is REDIS_URL its address?`;
  return null;
}

function isConnectFailure(e: Failure): boolean {
  return e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' || e.code === 'ETIMEDOUT' || e.code === 'ENOTFOUND' || e.code === 'EAI_AGAIN';
}

/** A multi-line error message's last non-blank line, trimmed ('' when there is none). */
export function lastLine(message: string): string {
  return (
    message
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean)
      .at(-1) ?? ''
  );
}
