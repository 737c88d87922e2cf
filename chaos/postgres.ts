// The run's own PostgreSQL: a primary and a streaming replica from this machine's PostgreSQL 15
// package (as test/helpers/pg-replica.ts makes them), both on the fake clock and with server
// messages in German, so that nothing in intake may depend on PostgreSQL's English error text.
// initdb refuses root, so as root every server command runs as the `postgres` user.
import { execFile, spawn } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from '../test/helpers/free-port.ts';
import { onCleanup } from './cleanup.ts';

const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';
const execFileAsync = promisify(execFile);
export const GERMAN = 'de_DE.UTF-8';

interface Owner {
  uid: number;
  gid: number;
}

async function postgresOwner(): Promise<Owner | null> {
  if (process.getuid?.() !== 0) return null;
  const uid = Number((await execFileAsync('id', ['-u', 'postgres'])).stdout.trim());
  const gid = Number((await execFileAsync('id', ['-g', 'postgres'])).stdout.trim());
  return { uid, gid };
}

/** Runs a PostgreSQL program (as `postgres` when root) with exactly `env`; rejects with its output on failure. */
function runServerCommand(owner: Owner | null, program: string, args: string[], env: Record<string, string>): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(BIN, program), args, {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(owner ? { uid: owner.uid, gid: owner.gid } : {}),
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${program} ${args.join(' ')} exited ${code}: ${out.trim()}`))));
  });
}

/**
 * Generates the German locale into `dir` without touching the system's locales: glibc reads
 * locales from LOCPATH when it is set. Done once per chaos invocation (~2 s).
 */
export async function germanLocale(dir: string): Promise<string> {
  const locales = path.join(dir, 'locales');
  mkdirSync(locales, { recursive: true });
  if (!existsSync(path.join(locales, GERMAN))) await execFileAsync('localedef', ['-i', 'de_DE', '-f', 'UTF-8', path.join(locales, GERMAN)]);
  chmodSync(dir, 0o755);
  return locales;
}

export interface OwnPostgres {
  primaryUrl(database: string): string;
  replicaUrl(database: string): string;
  /** SIGSTOP the primary's postmaster and every process it forked (each backend leads a process group of its own, so a group signal misses them). */
  freezePrimary(): void;
  thawPrimary(): void;
  stopPrimary(): Promise<void>;
  startPrimary(): Promise<void>;
  stopReplica(): Promise<void>;
  startReplica(): Promise<void>;
  logFiles(): string[];
  close(): Promise<void>;
}

/** The pids of the processes whose parent is `pid` (a scan of /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // The command name may hold spaces and parentheses: the fields after the last ')' are fixed.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // Exited while scanned.
    }
  }
  return out;
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // Exited meanwhile.
  }
}

export async function startPostgres(options: { dir: string; locales: string; clockEnv: Record<string, string> }): Promise<OwnPostgres> {
  const { dir, locales, clockEnv } = options;
  const owner = await postgresOwner();
  const base = path.join(dir, 'pg');
  mkdirSync(base, { recursive: true });
  if (owner) chownSync(base, owner.uid, owner.gid);
  const primaryDir = path.join(base, 'p');
  const replicaDir = path.join(base, 'r');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  const env = { ...clockEnv, LOCPATH: locales, LC_ALL: 'C.UTF-8' };
  // fsync off: a stop -m immediate is a crash of PostgreSQL, not of the machine, so the kernel
  // still holds every write; durability against power loss is not what this run looks at.
  const serverOptions = (port: number) =>
    `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${base} -c fsync=off -c max_connections=200 -c lc_messages=${GERMAN}`;
  const pidOf = (data: string) => Number(readFileSync(path.join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const start = (data: string, port: number, log: string) =>
    runServerCommand(owner, 'pg_ctl', ['-D', data, '-o', serverOptions(port), '-l', path.join(base, log), '-w', '-t', '60', 'start'], env);
  const stop = (data: string) => runServerCommand(owner, 'pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop'], env).catch(() => {});
  let frozen = false;
  const primaryPid = () => pidOf(primaryDir);

  const own: OwnPostgres = {
    primaryUrl: (db) => `postgresql://postgres@127.0.0.1:${primaryPort}/${db}`,
    replicaUrl: (db) => `postgresql://postgres@127.0.0.1:${replicaPort}/${db}`,
    freezePrimary() {
      const pid = primaryPid();
      // The postmaster first: once stopped it forks no new backend while its children are stopped.
      signal(pid, 'SIGSTOP');
      for (const child of childrenOf(pid)) signal(child, 'SIGSTOP');
      frozen = true;
    },
    thawPrimary() {
      if (!frozen) return;
      const pid = primaryPid();
      for (const child of childrenOf(pid)) signal(child, 'SIGCONT');
      signal(pid, 'SIGCONT');
      frozen = false;
    },
    async stopPrimary() {
      own.thawPrimary();
      await stop(primaryDir);
    },
    startPrimary: () => start(primaryDir, primaryPort, 'primary.log').then(() => {}),
    stopReplica: async () => {
      await stop(replicaDir);
    },
    startReplica: () => start(replicaDir, replicaPort, 'replica.log').then(() => {}),
    logFiles: () => [path.join(base, 'primary.log'), path.join(base, 'replica.log')],
    async close() {
      own.thawPrimary();
      await stop(replicaDir);
      await stop(primaryDir);
    },
  };
  onCleanup(
    'PostgreSQL',
    () => own.close(),
    () => {
      // The last resort while exiting: SIGQUIT is PostgreSQL's immediate shutdown.
      for (const data of [replicaDir, primaryDir]) {
        try {
          const pid = pidOf(data);
          signal(pid, 'SIGCONT');
          signal(pid, 'SIGQUIT');
        } catch {
          // Not running.
        }
      }
    },
  );
  await runServerCommand(owner, 'initdb', ['-D', primaryDir, '-A', 'trust', '-U', 'postgres', '--no-sync', '--locale=C.UTF-8'], env);
  await own.startPrimary();
  await runServerCommand(owner, 'pg_basebackup', ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replicaDir, '-R', '--no-sync'], env);
  await own.startReplica();
  return own;
}

/** One query on a short-lived connection (the runner's own reads: the clock, retention, the final state). */
export async function queryOnce<R extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = [], timeoutMs = 10_000): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => {});
  await client.connect();
  try {
    return (await client.query<R>(sql, values)).rows;
  } finally {
    await client.end().catch(() => {});
  }
}
