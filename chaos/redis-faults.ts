// Faults of the run's Redis Cluster: a master frozen (SIGSTOP, then SIGCONT) and a master
// SIGKILLed so that its replica is promoted, the killed node then started again to rejoin as a
// replica. Healthy means every slot served and every master with a connected replica, which
// REDIS_MIN_REPLICA_ACKS=1 needs before a partition takes batches again.
import type { ClusterNode, OwnCluster } from '../test/helpers/redis-cluster.ts';

export async function masters(cluster: OwnCluster): Promise<ClusterNode[]> {
  const ranges = await cluster.slotRanges();
  return [...ranges.keys()].sort((a, b) => a - b).map((port) => cluster.all.find((n) => n.port === port)!);
}

export function alive(node: ClusterNode): boolean {
  try {
    process.kill(node.pid(), 0);
    return true;
  } catch {
    return false;
  }
}

/** Every slot served, cluster_state ok, and three masters each with a connected replica. */
export async function whole(cluster: OwnCluster): Promise<boolean> {
  if (!(await cluster.healthy().catch(() => false))) return false;
  for (const node of cluster.all) {
    if (!alive(node)) continue;
    const text = (await node.admin.cluster('NODES').catch(() => null)) as string | null;
    if (!text) continue;
    const lines = text
      .trim()
      .split('\n')
      .map((l) => l.split(' '));
    const masterIds = lines.filter((f) => f[2].includes('master') && !f[2].includes('fail') && f.length > 8).map((f) => f[0]);
    const replicaOf = lines.filter((f) => f[2].includes('slave') && !f[2].includes('fail') && f[7] === 'connected').map((f) => f[3]);
    return masterIds.length === 3 && masterIds.every((id) => replicaOf.includes(id));
  }
  return false;
}

export async function waitWhole(cluster: OwnCluster, timeoutMs = 45_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await whole(cluster)) return true;
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

export function freeze(node: ClusterNode): void {
  process.kill(node.pid(), 'SIGSTOP');
}

export function thaw(node: ClusterNode): void {
  try {
    process.kill(node.pid(), 'SIGCONT');
  } catch {
    // Not running.
  }
}

/** Waits until a node other than `victim` serves the slots `victim` served (its replica was promoted). */
export async function promoted(cluster: OwnCluster, victimPort: number, slot: number, timeoutMs = 30_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const master = await cluster.masterOf(slot).catch(() => null);
    if (master && master.port !== victimPort) return true;
    await new Promise((r) => setTimeout(r, 200));
  }
  return false;
}

/** Each node thawed, each stopped one started again, and the cluster whole. */
export async function healRedis(cluster: OwnCluster): Promise<boolean> {
  for (const node of cluster.all) {
    if (alive(node)) thaw(node);
    else await cluster.restart(node);
  }
  return waitWhole(cluster, 60_000);
}
