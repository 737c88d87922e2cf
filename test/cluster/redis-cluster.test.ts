// intake on a real Redis Cluster (three masters, three replicas, started by the test from this
// machine's redis-server): two gateways and two workers over QUEUE_PARTITIONS=3. The partitions
// land one per master (asked of the cluster with CLUSTER KEYSLOT), Track batches go to every
// partition and each event is stored once, Identify's outbox relay and the journeys it and Track
// start work, a key revoked is refused by both gateways once the command returns, and
// `intake events get` finds an event queued in any partition. Runs on a database of its own: the
// outbox is per database, and this file's workers relay it.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test, { registerCompletionHandler } from 'ava';
import { Queue } from 'bullmq';
import { eventsGet } from '../../cli/commands/events.ts';
import { journeyCreate, journeyPublish, journeyStatsCommand } from '../../cli/commands/journey.ts';
import { keyRevoke } from '../../cli/commands/key.ts';
import { createLogger } from '../../platform/logger.ts';
import { eventsQueueNames, keySlot } from '../../platform/queue-keys.ts';
import { createRedis, type Redis } from '../../platform/redis.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import { startGateway, type Gateway } from '../../gateway/server.ts';
import { startWorkers, type Workers } from '../../workers/main.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { startRedisCluster, type OwnCluster } from '../helpers/redis-cluster.ts';
import { closeInTurn } from '../helpers/teardown.ts';
import { newTenant, openHarness, ownDatabase, type Harness, type Tenant } from '../helpers/services.ts';

let cluster: OwnCluster;
let h: Harness;
let redis: Redis;
const gateways: Gateway[] = [];
const workers: Workers[] = [];
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-cluster');

test.before(async () => {
  cluster = await startRedisCluster(0);
  h = await openHarness({
    REDIS_CLUSTER_NODES: cluster.nodes,
    QUEUE_PARTITIONS: '3',
    DATABASE_URL: await ownDatabase('cluster'),
    JOURNEY_TICK_MS: '50',
    JOURNEY_GRACE_MS: '1000',
    WORKER_BATCH_WAIT_MS: '2',
  });
  redis = createRedis(h.config, 'worker');
  for (let i = 0; i < 2; i++) {
    gateways.push(await startGateway({ config: h.config, db: h.db, log }));
    workers.push(await startWorkers({ config: h.config, db: h.db, log }));
  }
});

// Bounded: the cluster is torn down even when a close hangs on the slot the last test took down.
// Once every result is reported: BullMQ's close of a worker on a cluster can leave its blocking
// connection's handle behind (taskforcesh/bullmq#4065), which keeps this file's process alive
// after a teardown that completed, and ava would report it as failing to exit.
registerCompletionHandler(() => process.exit());

test.after.always(() =>
  closeInTurn([
    ['gateways', () => Promise.all(gateways.map((g) => g.close()))],
    ['workers', () => Promise.all(workers.map((w) => w.close()))],
    ['redis', () => redis?.disconnect()],
    ['harness', () => h?.close()],
    ['cluster', () => cluster?.close()],
  ]),
);

const urlOf = (i: number) => `http://127.0.0.1:${gateways[i % gateways.length].port}`;
const track = (i: number, tenant: Tenant, body: Record<string, unknown>) =>
  request(urlOf(i), `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody(body) });

test.serial('the partitions hash to one slot each, served by three different masters (CLUSTER KEYSLOT)', async (t) => {
  const names = eventsQueueNames(h.config);
  t.is(names.length, 3);
  const masters = new Set<number>();
  for (const name of names) {
    const slot = Number(await cluster.all[0].admin.cluster('KEYSLOT', `${h.config.queuePrefix}:${name}:wait`));
    t.is(slot, keySlot(name), `intake computes ${name}'s slot as Redis does`);
    masters.add((await cluster.masterOf(slot)).port);
  }
  t.is(masters.size, 3, 'one partition per master');
});

test.serial('Track through two gateways lands in every partition and each event is stored once; events get reads every partition', async (t) => {
  const tenant = await newTenant(h);
  const sent: string[] = [];
  for (let round = 0; round < 6; round++) {
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) => {
        const messageId = `c-${round}-${i}`;
        sent.push(messageId);
        return track(i, tenant, { messageId, event: 'Clicked', userId: `u-${i}` });
      }),
    );
    t.deepEqual(
      replies.map((r) => r.status),
      replies.map(() => 202),
    );
  }
  // Each partition's job counter (BullMQ's `id` key) says it took batches.
  for (const name of eventsQueueNames(h.config)) {
    const added = Number(await redis.get(`${h.config.queuePrefix}:${name}:id`));
    t.true(added > 0, `${name} took batches`);
  }
  const stored = await eventually(async () => {
    const n = await h.db.event.count({ where: { environmentId: tenant.environmentId } });
    return n >= sent.length ? n : 0;
  });
  t.is(stored, sent.length);
  t.like(await eventsGet(h.operator, [tenant.slug, sent[0]]), { messageId: sent[0] });

  // A job left waiting in the last partition (no worker takes it fast enough to matter: it is
  // read straight after the add) is found by `events get` as pending.
  const last = new Queue(eventsQueueNames(h.config)[2], { connection: redis, prefix: h.config.queuePrefix });
  await last.pause();
  try {
    const queued = {
      environmentId: tenant.environmentId,
      messageId: 'queued-1',
      receivedAt: Date.now(),
      timestampMs: Date.now(),
      payload: JSON.stringify(trackBody({ messageId: 'queued-1' })),
    };
    await last.add('track (1 event)', { events: [queued] });
    t.like(await eventsGet(h.operator, [tenant.slug, 'queued-1']), { messageId: 'queued-1', status: 'pending' });
  } finally {
    await last.resume();
    await last.close();
  }
});

test.serial('journeys from Track and from Identify (through the outbox relay and the hash-tagged service-events queue)', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const dir = await mkdtemp(path.join(tmpdir(), 'intake-cluster-journeys-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const journey = async (definition: Record<string, unknown>) => {
    const file = path.join(dir, `${definition.name as string}.json`);
    await writeFile(file, JSON.stringify(definition));
    const created = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
    await journeyPublish(h.operator, [tenant.slug, created.id]);
    return created.id;
  };
  const signedUp = await journey({ name: 'signed-up', entry: { event: 'Signed Up' }, steps: [] });
  const plan = await journey({ name: 'plan', entry: { attributeChanged: 'plan' }, steps: [] });
  for (let i = 0; i < 4; i++) t.is((await track(i, tenant, { messageId: `su-${i}`, event: 'Signed Up', userId: `s-${i}` })).status, 202);
  for (let i = 0; i < 2; i++) {
    const reply = await request(urlOf(i), `/api/identify/${tenant.slug}`, {
      headers: { 'x-api-key': tenant.key },
      body: { userId: `p-${i}`, messageId: `id-${i}`, traits: { plan: 'pro' } },
    });
    t.is(reply.status, 200);
  }
  const entered = (id: string) =>
    eventually(async () => ((await journeyStatsCommand(h.operator, [tenant.slug, id])) as { entered: number }).entered, { timeoutMs: 20_000 });
  t.is(await eventually(async () => ((await entered(signedUp)) === 4 ? 4 : 0)), 4);
  t.is(await eventually(async () => ((await entered(plan)) === 2 ? 2 : 0)), 2);
});

test.serial('a revoked key is refused by both gateways once `key revoke` returns (invalidation over the cluster)', async (t) => {
  const tenant = await newTenant(h);
  for (let i = 0; i < 2; i++) t.is((await track(i, tenant, { messageId: `k-${i}` })).status, 202, 'the key is cached by both gateways');
  await keyRevoke(h.operator, [tenant.slug, tenant.suffix]);
  for (let i = 0; i < 2; i++) t.is((await track(i, tenant, { messageId: `k-after-${i}` })).status, 401);
});

test.serial(
  "the dashboard lists every partition and the hash-tagged queues; /metrics counts the partitions as one events queue and reads the masters' memory",
  async (t) => {
    const board = await startDashboard({ config: { ...h.config, dashboardPort: 0, dashboardHost: '127.0.0.1', dashboardPassword: '' }, db: h.db, log });
    t.teardown(() => board.close());
    const queues = await request(`http://127.0.0.1:${board.port}`, '/api/queues', { method: 'GET' });
    t.is(queues.status, 200);
    t.deepEqual(
      (queues.json.queues as { name: string }[]).map((q) => q.name).sort(),
      [...eventsQueueNames(h.config), '{events-dead-letter}', '{service-events}'].sort(),
    );
    const metrics = (await request(urlOf(0), '/metrics', { method: 'GET' })).text;
    t.regex(metrics, /^intake_queue_jobs\{queue="events",state="waiting"\} \d+$/m);
    t.notRegex(metrics, /intake_queue_jobs\{queue="\{events-/);
    t.regex(metrics, /^intake_redis_memory_used_bytes \d+$/m);
  },
);

// Last: it leaves the cluster without a master for one slot.
test.serial('a slot with neither master nor replica: Track answers 503 within ENQUEUE_TIMEOUT_MS, none waits', async (t) => {
  const tenant = await newTenant(h);
  const bound = 800;
  const single = await startGateway({ config: { ...h.config, queuePartitions: 1, enqueueTimeoutMs: bound }, db: h.db, log });
  t.teardown(() => single.close());
  const send = (messageId: string) =>
    request(`http://127.0.0.1:${single.port}`, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ messageId }) });
  t.is((await send('before')).status, 202);
  const slot = keySlot(eventsQueueNames({ ...h.config, queuePartitions: 1 })[0]);
  const master = await cluster.masterOf(slot);
  const replicas = (String(await master.admin.cluster('REPLICAS', String(await master.admin.cluster('MYID')))).match(/127\.0\.0\.1:(\d+)/g) ?? []).map((a) =>
    Number(a.split(':')[1]),
  );
  const killed = cluster.all.filter((n) => n === master || replicas.includes(n.port));
  for (const node of killed) cluster.kill(node);
  // Back before the workers close: a job of theirs whose completion waits on the dead slot
  // would hold their close (BullMQ waits for jobs in hand) and the file would never exit.
  t.teardown(async () => {
    for (const node of killed) await cluster.restart(node);
    await eventually(() => cluster.healthy(), { timeoutMs: 20_000 }).catch(() => {});
  });
  const slowest = { ms: 0 };
  for (let i = 0; i < 8; i++) {
    const started = performance.now();
    const reply = await send(`down-${i}`);
    slowest.ms = Math.max(slowest.ms, performance.now() - started);
    t.is(reply.status, 503);
    t.is(reply.text, '{"error":"Event storage is unavailable"}');
  }
  t.true(slowest.ms < bound + 1000, `slowest 503 in ${Math.round(slowest.ms)} ms`);
});
