// A Redis Cluster master SIGKILLed under Track load, with REDIS_MIN_REPLICA_ACKS=1 and three
// partitions: every request answers 202 or 503 (none hangs while the slot has no master), intake
// recovers without a restart (once the replica took over and the killed node came back as its
// replica, every partition takes batches again), and every event answered 202 is stored exactly
// once: its batch was on a replica before the 202, so the promotion kept it.
// Its gateways and workers are processes of their own, as deployed.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import test from 'ava';
import { eventsQueueNames, keySlot } from '../../platform/queue-keys.ts';
import { eventually } from '../helpers/eventually.ts';
import { spawnIntake, type Child } from '../helpers/processes.ts';
import { postTrack, trackBody } from '../helpers/http.ts';
import { startRedisCluster, type OwnCluster } from '../helpers/redis-cluster.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

let cluster: OwnCluster;
let h: Harness;
const gateways: Child[] = [];
const workers: Child[] = [];
const ENQUEUE_TIMEOUT_MS = 1500;

test.before(async () => {
  cluster = await startRedisCluster(1);
  h = await openHarness({
    REDIS_CLUSTER_NODES: cluster.nodes,
    QUEUE_PARTITIONS: '3',
    REDIS_MIN_REPLICA_ACKS: '1',
    ENQUEUE_TIMEOUT_MS: String(ENQUEUE_TIMEOUT_MS),
    // A job active on the killed master is taken again soon after the promotion.
    WORKER_LOCK_MS: '2000',
    WORKER_BATCH_WAIT_MS: '2',
  });
  for (let i = 0; i < 2; i++) {
    gateways.push(await spawnIntake('gateway', h.env));
    workers.push(await spawnIntake('worker', h.env));
  }
});

test.after.always(async () => {
  await Promise.all([...gateways, ...workers].map((c) => c.kill('SIGTERM')));
  await h?.close();
  await cluster?.close();
});

/** How many batch jobs a partition has taken (BullMQ's job counter), read on the master of its slot. */
async function jobsAdded(partition: number): Promise<number> {
  const name = eventsQueueNames(h.config)[partition];
  const master = await cluster.masterOf(keySlot(name));
  return Number(await master.admin.get(`${h.config.queuePrefix}:${name}:id`));
}

const CLIENTS = 16;

test('a master SIGKILLed under Track load: 202 or 503, recovery without a restart, every 202 stored exactly once', async (t) => {
  const tenant = await newTenant(h);
  const run = randomBytes(4).toString('hex');
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  t.teardown(() => agent.destroy());
  const post = (gateway: Child, body: Record<string, unknown>) => postTrack(agent, gateway.url, tenant, body);

  const accepted: string[] = [];
  const statuses = new Map<number, number>();
  const unexpected: string[] = [];
  let slowest = 0;
  let stop = false;
  const client = async (c: number) => {
    for (let i = 0; !stop; i++) {
      const body = trackBody({ messageId: `fo-${run}-${c}-${i}`, event: 'Failover', userId: `u-${c}`, properties: { c, i } });
      try {
        const reply = await post(gateways[c % 2], body);
        statuses.set(reply.status, (statuses.get(reply.status) ?? 0) + 1);
        slowest = Math.max(slowest, reply.ms);
        if (reply.status === 202) accepted.push(body.messageId as string);
        else if (reply.status !== 503) unexpected.push(`${reply.status} ${reply.text}`);
      } catch (err) {
        unexpected.push((err as Error).message);
      }
    }
  };
  const load = Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));

  await eventually(async () => accepted.length >= 300, { timeoutMs: 20_000, intervalMs: 20 });
  // The master of the first partition's slot, SIGKILLed mid-load.
  const slot = keySlot(eventsQueueNames(h.config)[0]);
  const victim = await cluster.masterOf(slot);
  const beforeKill = accepted.length;
  cluster.kill(victim);
  // Its replica takes the slot over.
  const promoted = await eventually(
    async () => {
      const master = await cluster.masterOf(slot).catch(() => null);
      return master && master.port !== victim.port ? master : null;
    },
    { timeoutMs: 20_000, intervalMs: 100 },
  );
  t.truthy(promoted, 'a replica took over the slot');
  // The killed node comes back as the new master's replica: the slot has a replica to WAIT for again.
  await cluster.restart(victim);
  t.true(await eventually(() => cluster.healthy(), { timeoutMs: 20_000 }), 'the cluster is whole again');
  const afterHeal = accepted.length;
  await eventually(async () => accepted.length >= afterHeal + 300, { timeoutMs: 30_000, intervalMs: 20 });
  stop = true;
  await load;
  t.log({ statuses: Object.fromEntries(statuses), acceptedBeforeKill: beforeKill, accepted: accepted.length, slowestMs: Math.round(slowest) });

  t.deepEqual(unexpected, [], 'every request answered 202 or 503');
  // How long the slowest answer took is logged, not judged: under this load on a shared two-core
  // machine it says more about the machine than about the bound, which redis-cluster.test.ts
  // checks unloaded (a slot without a master: 503 within ENQUEUE_TIMEOUT_MS).

  // Recovered: the first partition, now on the promoted master, takes batches acknowledged by its replica again.
  const before = await jobsAdded(0);
  const recovered = await eventually(
    async () => {
      const replies = await Promise.all(
        Array.from({ length: 12 }, (_, i) => post(gateways[i % 2], trackBody({ messageId: `after-${run}-${i}-${Date.now()}` }))),
      );
      return replies.every((r) => r.status === 202) && (await jobsAdded(0)) > before;
    },
    { timeoutMs: 20_000, intervalMs: 200 },
  );
  t.true(recovered, 'every partition takes acknowledged batches again');

  // Every event answered 202 is stored, once.
  const ids = accepted.filter((id) => id.startsWith('fo-'));
  const stored = await eventually(
    async () => {
      const n = await h.db.event.count({ where: { environmentId: tenant.environmentId, messageId: { in: ids } } });
      return n === ids.length ? n : 0;
    },
    { timeoutMs: 30_000, intervalMs: 250 },
  );
  t.is(stored, ids.length, 'no event answered 202 was lost');
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId, messageId: { in: ids } }, select: { messageId: true, status: true } });
  t.is(new Set(rows.map((r) => r.messageId)).size, rows.length, 'none doubled');
  t.deepEqual(
    rows.filter((r) => r.status === 'failed'),
    [],
  );
});
