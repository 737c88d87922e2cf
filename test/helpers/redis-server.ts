// A redis-server of the test's own (a free port on 127.0.0.1, its files in a temporary folder),
// for what must never be done to the Redis other test files share: CONFIG SET maxmemory.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { eventually } from './eventually.ts';
import { freePort } from './free-port.ts';

export interface OwnRedis {
  url: string;
  /** A connection for the test to look and to set maxmemory with. */
  admin: Redis;
  /** used_memory and maxmemory, from INFO memory. */
  memory(): Promise<{ used: number; max: number }>;
  setMaxmemory(bytes: number): Promise<void>;
  /** Commands Redis refused for memory since it started (INFO errorstats). */
  oomRefusals(): Promise<number>;
  close(): Promise<void>;
}

/** Started with noeviction (Redis's default, and what BullMQ requires) and no persistence. */
/** `extraArgs`: more redis-server options (say `--replicaof 127.0.0.1 <port>` for a replica). */
export async function startOwnRedis(extraArgs: string[] = []): Promise<OwnRedis & { port: number }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'intake-redis-'));
  const port = await freePort();
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--maxmemory-policy', 'noeviction', ...extraArgs],
    { stdio: 'ignore' },
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const admin = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
  admin.on('error', () => {});
  const up = await eventually(() => admin.ping().then(() => true), { timeoutMs: 10_000, intervalMs: 50 });
  if (!up) throw new Error('redis-server did not start');
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    admin,
    memory: async () => {
      const text = await admin.info('memory');
      const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)![1]);
      return { used: field('used_memory'), max: field('maxmemory') };
    },
    setMaxmemory: async (bytes) => {
      await admin.config('SET', 'maxmemory', String(bytes));
    },
    oomRefusals: async () => Number(/^errorstat_OOM:count=(\d+)/m.exec(await admin.info('errorstats'))?.[1] ?? 0),
    async close() {
      admin.disconnect();
      child.kill('SIGKILL');
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
