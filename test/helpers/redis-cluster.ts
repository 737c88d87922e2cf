// A Redis Cluster of the test's own: three masters and three replicas, redis-server processes
// from this machine's package, each in a temporary folder on a loopback port, stopped by pid.
// Ports: TEST_CLUSTER_PORT_BASE (say 7201) + 10 × `group` + 0…5 where a range is reserved for
// the run, otherwise free ports whose cluster-bus port (+10000) is free too.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';
import { eventually } from './eventually.ts';

const run = promisify(execFile);

export interface ClusterNode {
  port: number;
  dir: string;
  pid(): number;
  /** Its own connection (not a cluster client), for CLUSTER and INFO commands. */
  admin: Redis;
}

export interface OwnCluster {
  /** REDIS_CLUSTER_NODES for intake. */
  nodes: string;
  all: ClusterNode[];
  /** The master that serves `slot` now. */
  masterOf(slot: number): Promise<ClusterNode>;
  /** Each master's slot ranges, by port. */
  slotRanges(): Promise<Map<number, [number, number][]>>;
  /** The replicas of a master that the cluster does not hold failed. */
  replicasOf(master: ClusterNode): Promise<ClusterNode[]>;
  /** SIGKILL a node (by the pid in its pid file). */
  kill(node: ClusterNode): void;
  /** Starts a killed node again, on its port and folder: it rejoins (as a replica once its replica was promoted). */
  restart(node: ClusterNode): Promise<void>;
  /** Every slot is served and cluster_state is ok, as every live node sees it. */
  healthy(): Promise<boolean>;
  close(): Promise<void>;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

async function freePairs(count: number): Promise<number[]> {
  const ports: number[] = [];
  while (ports.length < count) {
    const port = 20_000 + Math.floor(Math.random() * 30_000);
    if (!ports.includes(port) && (await portFree(port)) && (await portFree(port + 10_000))) ports.push(port);
  }
  return ports;
}

async function startNode(port: number, dir: string): Promise<void> {
  await run('redis-server', [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--cluster-enabled',
    'yes',
    '--cluster-config-file',
    'nodes.conf',
    // Short, so that a replica takes over about a second after its master is gone.
    '--cluster-node-timeout',
    '1000',
    '--appendonly',
    'no',
    '--save',
    '',
    '--dir',
    dir,
    '--daemonize',
    'yes',
    '--pidfile',
    path.join(dir, 'pid'),
    '--logfile',
    path.join(dir, 'log'),
  ]);
}

export async function startRedisCluster(group = 0): Promise<OwnCluster> {
  const base = Number(process.env.TEST_CLUSTER_PORT_BASE);
  const ports = base ? [0, 1, 2, 3, 4, 5].map((i) => base + group * 10 + i) : await freePairs(6);
  const all: ClusterNode[] = [];
  // A node left running on the reserved range by a run that was cut off would hold the port.
  if (base) await Promise.all(ports.map((port) => run('redis-cli', ['-p', String(port), 'shutdown', 'nosave']).catch(() => {})));
  for (const port of ports) {
    const dir = mkdtempSync(path.join(tmpdir(), `intake-cluster-${port}-`));
    await startNode(port, dir);
    const admin = new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1, retryStrategy: () => 200, lazyConnect: true });
    admin.on('error', () => {});
    all.push({ port, dir, admin, pid: () => Number(readFileSync(path.join(dir, 'pid'), 'utf8').trim()) });
  }
  const cluster: OwnCluster = {
    nodes: ports.map((p) => `127.0.0.1:${p}`).join(','),
    all,
    async slotRanges() {
      const ranges = new Map<number, [number, number][]>();
      for (const node of all) {
        const slots = (await node.admin.cluster('SLOTS').catch(() => null)) as [number, number, [string, number]][] | null;
        if (!slots) continue;
        for (const [from, to, [, port]] of slots) ranges.set(port, [...(ranges.get(port) ?? []), [from, to]]);
        return ranges;
      }
      throw new Error('no node answered CLUSTER SLOTS');
    },
    async masterOf(slot) {
      for (const [port, ranges] of await cluster.slotRanges()) if (ranges.some(([a, b]) => slot >= a && slot <= b)) return all.find((n) => n.port === port)!;
      throw new Error(`slot ${slot} has no master`);
    },
    async replicasOf(master) {
      const id = String(await master.admin.cluster('MYID'));
      // One node line each: `id host:port@bus flags …`, flags holding `fail` (or `fail?`) for a replica held down.
      const lines = (await master.admin.cluster('REPLICAS', id)) as unknown as string[];
      const live = lines.filter((l) => !/(^|,)fail\??(,|$)/.test(l.split(' ')[2] ?? ''));
      const ports = live.map((l) => Number(/:(\d+)@/.exec(l)?.[1]));
      return all.filter((n) => ports.includes(n.port));
    },
    kill(node) {
      process.kill(node.pid(), 'SIGKILL');
    },
    async restart(node) {
      await startNode(node.port, node.dir);
    },
    async healthy() {
      for (const node of all) {
        const info = (await node.admin.cluster('INFO').catch(() => null)) as string | null;
        if (info === null) continue;
        if (!/cluster_state:ok/.test(info) || !/cluster_slots_ok:16384/.test(info)) return false;
      }
      return true;
    },
    async close() {
      for (const node of all) {
        node.admin.disconnect();
        try {
          process.kill(node.pid(), 'SIGKILL');
        } catch {
          // Already stopped.
        }
        rmSync(node.dir, { recursive: true, force: true });
      }
    },
  };
  try {
    await Promise.all(all.map((n) => eventually(() => n.admin.ping().then(() => true), { timeoutMs: 10_000, intervalMs: 50 })));
    await run('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '1', '--cluster-yes']);
    const formed = await eventually(async () => (await cluster.healthy()) && (await everyMasterHasAReplica(all)), { timeoutMs: 30_000, intervalMs: 200 });
    if (!formed) throw new Error('the Redis Cluster did not form');
  } catch (err) {
    await cluster.close();
    throw err;
  }
  return cluster;
}

async function everyMasterHasAReplica(all: ClusterNode[]): Promise<boolean> {
  const text = (await all[0].admin.cluster('NODES')) as string;
  const lines = text.trim().split('\n');
  const masters = lines.filter((l) => / master /.test(l) || /,master /.test(l) || /master,/.test(l)).map((l) => l.split(' ')[0]);
  const replicaOf = lines.filter((l) => /slave/.test(l)).map((l) => l.split(' ')[3]);
  return masters.length === 3 && masters.every((id) => replicaOf.includes(id));
}
