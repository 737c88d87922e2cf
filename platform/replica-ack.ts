// Acknowledgement by replicas (REDIS_MIN_REPLICA_ACKS): a write counts only once WAIT says that
// many replicas hold it. WAIT answers for the writes sent on the connection it is sent on, and a
// fresh connection has sent none (it answers at once, with every replica): so WAIT goes to the
// very connection that carried the write, and a write whose connection was replaced, or whose
// slot moved to another node, between the write and WAIT's answer is not acknowledged.
import { keySlot } from './queue-keys.ts';
import type { Cluster, Redis, SingleRedis } from './redis.ts';

/** What add() rejects with when replicas did not confirm a write in time (the caller answers 503). */
export class ReplicaAckError extends Error {
  override name = 'ReplicaAckError';
}

interface WriteConnection {
  node: SingleRedis;
  /** The socket the node's commands go out on: replaced by a reconnect. */
  stream: unknown;
}

/** The connection that commands on `key` go out on: the one Redis, or the master of its slot as the cluster client knows it. */
function connectionFor(redis: Redis, key: string): WriteConnection | null {
  let node: SingleRedis | undefined;
  if (redis.isCluster) {
    const cluster = redis as Cluster;
    const master = cluster.slots[keySlot(key)]?.[0];
    node = master === undefined ? undefined : cluster.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === master);
  } else {
    node = redis as SingleRedis;
  }
  return node && node.status === 'ready' ? { node, stream: node.stream } : null;
}

const same = (a: WriteConnection | null, b: WriteConnection | null) => a !== null && b !== null && a.node === b.node && a.stream === b.stream;

/**
 * Runs `write` (commands on keys in the slot of `key`), then WAIT for `replicas` on the
 * connection it went out on, until `deadline` (epoch ms). Rejects with ReplicaAckError when the
 * connection was not ready, was replaced or moved at any point from before the write to WAIT's
 * answer, or when fewer replicas confirmed: the write may be stored, but is not acknowledged.
 */
export async function withReplicaAcks<T>(redis: Redis, key: string, replicas: number, deadline: number, write: () => Promise<T>): Promise<T> {
  const before = connectionFor(redis, key);
  if (!before) throw new ReplicaAckError('no ready connection to the master of the write');
  const result = await write();
  if (!same(before, connectionFor(redis, key))) throw new ReplicaAckError('the connection of the write was replaced before WAIT');
  const acked = Number(await before.node.call('WAIT', replicas, Math.max(1, deadline - Date.now())));
  if (!same(before, connectionFor(redis, key))) throw new ReplicaAckError('the connection of the write was replaced during WAIT');
  if (acked < replicas) throw new ReplicaAckError(`${acked} of ${replicas} replicas confirmed the write in time`);
  return result;
}
