// A PostgreSQL primary and a streaming replica of the test's own, from this machine's
// PostgreSQL 15 package: initdb, pg_basebackup -R and pg_ctl in a temporary folder, on loopback
// ports (TEST_CLUSTER_PORT_BASE + 49 and + 50 where a range is reserved for the run, otherwise
// free ones). initdb refuses root, so as root (CI) they run as the `postgres` user.
import { execFile } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { freePort } from './free-port.ts';

const run = promisify(execFile);
const BIN = process.env.PG_BIN ?? '/usr/lib/postgresql/15/bin';

export interface OwnReplication {
  /** Connection URLs of database `name` on the primary and on the replica. */
  primaryUrl(name: string): string;
  replicaUrl(name: string): string;
  /** Runs SQL on the replica (as the superuser). */
  onReplica(sql: string): Promise<pg.QueryResult>;
  stopReplica(): Promise<void>;
  startReplica(): Promise<void>;
  close(): Promise<void>;
}

async function asPostgres(command: string, args: string[]): Promise<void> {
  if (process.getuid?.() === 0) {
    const quoted = [command, ...args].map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
    await run('su', ['postgres', '-s', '/bin/sh', '-c', quoted]);
  } else {
    await run(command, args);
  }
}

export async function startReplication(): Promise<OwnReplication> {
  const base = Number(process.env.TEST_CLUSTER_PORT_BASE);
  const [primaryPort, replicaPort] = base ? [base + 49, base + 50] : [await freePort(), await freePort()];
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-pg-'));
  if (process.getuid?.() === 0) {
    const { stdout } = await run('id', ['-u', 'postgres']);
    const { stdout: gid } = await run('id', ['-g', 'postgres']);
    chownSync(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const primaryDir = path.join(dir, 'p');
  const replicaDir = path.join(dir, 'r');
  // Durability is not what these tests look at: fsync off keeps them fast on a busy machine.
  const options = (port: number) => `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=${dir} -c fsync=off -c max_connections=60`;
  const start = (data: string, port: number, logName: string) =>
    asPostgres(path.join(BIN, 'pg_ctl'), ['-D', data, '-o', options(port), '-l', path.join(dir, logName), '-w', 'start']);
  const stop = (data: string) => asPostgres(path.join(BIN, 'pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => {});
  const replication: OwnReplication = {
    primaryUrl: (name) => `postgresql://postgres@127.0.0.1:${primaryPort}/${name}`,
    replicaUrl: (name) => `postgresql://postgres@127.0.0.1:${replicaPort}/${name}`,
    async onReplica(sql) {
      const client = new pg.Client({ connectionString: replication.replicaUrl('postgres') });
      await client.connect();
      try {
        return await client.query(sql);
      } finally {
        await client.end();
      }
    },
    stopReplica: () => stop(replicaDir),
    startReplica: () => start(replicaDir, replicaPort, 'r.log'),
    async close() {
      await stop(replicaDir);
      await stop(primaryDir);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await asPostgres(path.join(BIN, 'initdb'), ['-D', primaryDir, '-A', 'trust', '-U', 'postgres', '--no-sync']);
    await start(primaryDir, primaryPort, 'p.log');
    await asPostgres(path.join(BIN, 'pg_basebackup'), ['-h', '127.0.0.1', '-p', String(primaryPort), '-U', 'postgres', '-D', replicaDir, '-R', '--no-sync']);
    await replication.startReplica();
  } catch (err) {
    await replication.close();
    throw err;
  }
  return replication;
}
