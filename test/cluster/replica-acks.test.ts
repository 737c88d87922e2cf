// REDIS_MIN_REPLICA_ACKS on one Redis with a replica of its own (redis-server processes started
// here): a 202 comes only once the replica holds the batch, a Redis with no replica answers 503
// within the enqueue bound (and at once after, its one partition out of the rotation until a
// replica confirms a probe), and a write whose connection was replaced before WAIT is not
// acknowledged (WAIT on a fresh connection covers none of its writes and answers at once).
import test from 'ava';
import { createLogger } from '../../platform/logger.ts';
import { ReplicaAckError, withReplicaAcks } from '../../platform/replica-ack.ts';
import { createRedis, type SingleRedis } from '../../platform/redis.ts';
import { startGateway } from '../../gateway/server.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { closeEmptied, newTenant, openHarness } from '../helpers/services.ts';

let master: OwnRedis & { port: number };
let replica: (OwnRedis & { port: number }) | undefined;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-replica-acks');

test.before(async () => {
  master = await startOwnRedis();
});

test.after.always(async () => {
  await replica?.close();
  await master?.close();
});

async function withReplica() {
  replica ??= await startOwnRedis(['--replicaof', '127.0.0.1', String(master.port)]);
  const linked = await eventually(async () => /master_link_status:up/.test(await replica!.admin.info('replication')), { timeoutMs: 15_000 });
  if (!linked) throw new Error('the replica did not link');
}

test.serial('no replica: Track answers 503 within ENQUEUE_TIMEOUT_MS; with REDIS_MIN_REPLICA_ACKS=0 the same Redis answers 202', async (t) => {
  const h = await openHarness({ REDIS_URL: master.url, REDIS_MIN_REPLICA_ACKS: '1', ENQUEUE_TIMEOUT_MS: '400' });
  const plain = await openHarness({ ...h.env, REDIS_MIN_REPLICA_ACKS: '0' });
  const acked = await startGateway({ config: h.config, db: h.db, log });
  const unacked = await startGateway({ config: plain.config, db: plain.db, log });
  try {
    const tenant = await newTenant(h);
    const send = (port: number, messageId: string) =>
      request(`http://127.0.0.1:${port}`, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ messageId }) });
    const started = performance.now();
    const refused = await send(acked.port, 'no-replica');
    const ms = performance.now() - started;
    t.is(refused.status, 503);
    t.true(ms >= 380 && ms < 400 + 1000, `answered in ${Math.round(ms)} ms`);
    t.is((await send(unacked.port, 'no-replica-plain')).status, 202);
  } finally {
    await acked.close();
    await unacked.close();
    await closeEmptied(plain);
    await h.close();
  }
});

test.serial(
  'no replica: once a batch could not be confirmed, Track answers 503 at once and /readyz says why; a replica attached brings the partition back',
  async (t) => {
    const h = await openHarness({ REDIS_URL: master.url, REDIS_MIN_REPLICA_ACKS: '1', ENQUEUE_TIMEOUT_MS: '400' });
    const gateway = await startGateway({ config: h.config, db: h.db, log });
    try {
      const tenant = await newTenant(h);
      const url = `http://127.0.0.1:${gateway.port}`;
      const send = async (messageId: string) => {
        const started = performance.now();
        const reply = await request(url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ messageId }) });
        return { status: reply.status, text: reply.text, ms: performance.now() - started };
      };
      const inRotation = async () => samples((await request(url, '/metrics', { method: 'GET' })).text);
      const first = await send('unconfirmed');
      t.is(first.status, 503);
      // WAIT is given the bound less 50 ms (event-batcher.ts: a replica that does not confirm is
      // then told apart from a master that does not answer).
      t.true(first.ms >= 345, `the first waits for WAIT (${Math.round(first.ms)} ms)`);
      const then = [];
      for (let i = 0; i < 20; i++) then.push(await send(`refused-${i}`));
      t.deepEqual([...new Set(then.map((r) => r.text))], ['{"error":"Event storage is unavailable"}']);
      const slowest = Math.max(...then.map((r) => r.ms));
      // At once rather than after WAIT's 400 ms (partition-health.test.ts, run alone, holds them to 50 ms).
      t.true(slowest < 200, `the next ones at once: slowest ${Math.round(slowest)} ms`);
      const ready = await request(url, '/readyz', { method: 'GET' });
      t.is(ready.status, 503);
      t.like(ready.json, { status: 'unavailable', postgres: true, redis: true, reason: 'no partition of the events queue takes batches (out: events)' });
      t.is(ready.json.partitions, undefined, 'one partition: named in the reason only');
      let m = await inRotation();
      t.is(m.get(series('intake_queue_partition_in_rotation', { partition: 'events' })), 0);
      t.is(m.get(series('intake_queue_partition_removals_total', { partition: 'events' })), 1);

      await withReplica();
      const linked = performance.now();
      const back = await eventually(async () => (await send(`back-${Date.now()}`)).status === 202, { timeoutMs: 5000, intervalMs: 50 });
      t.true(back, 'accepted again once a probe is confirmed');
      t.log(`202 again ${Math.round(performance.now() - linked)} ms after the replica linked`);
      m = await inRotation();
      t.is(m.get(series('intake_queue_partition_in_rotation', { partition: 'events' })), 1);
      t.is(m.get(series('intake_queue_partition_returns_total', { partition: 'events' })), 1);
      t.is((await request(url, '/readyz', { method: 'GET' })).status, 200);
    } finally {
      await gateway.close();
      await closeEmptied(h);
    }
  },
);

test.serial('with a replica: every 202 is already on the replica when it is answered', async (t) => {
  await withReplica();
  const h = await openHarness({ REDIS_URL: master.url, REDIS_MIN_REPLICA_ACKS: '1', ENQUEUE_TIMEOUT_MS: '2000' });
  const gateway = await startGateway({ config: h.config, db: h.db, log });
  try {
    const tenant = await newTenant(h);
    for (let i = 0; i < 20; i++) {
      const replies = await Promise.all(
        [0, 1, 2, 3].map((j) =>
          request(`http://127.0.0.1:${gateway.port}`, `/api/track/${tenant.slug}`, {
            headers: { 'x-api-key': tenant.key },
            body: trackBody({ messageId: `r-${i}-${j}` }),
          }),
        ),
      );
      t.deepEqual(
        replies.map((r) => r.status),
        [202, 202, 202, 202],
      );
      // The batch jobs' counter on the replica: it already counts every batch answered so far.
      const onMaster = Number(await master.admin.get(`${h.config.queuePrefix}:events:id`));
      const onReplica = Number(await replica!.admin.get(`${h.config.queuePrefix}:events:id`));
      t.is(onReplica, onMaster);
    }
  } finally {
    await gateway.close();
    await closeEmptied(h);
  }
});

test.serial('a connection replaced between the write and WAIT: no acknowledgement, though WAIT on the new connection would answer at once', async (t) => {
  await withReplica();
  const redis = createRedis({ redisUrl: master.url }, 'producer') as SingleRedis;
  t.teardown(() => redis.disconnect());
  await eventually(async () => redis.status === 'ready');
  // The fact the check is for: WAIT on a fresh connection reports every replica at once.
  t.is(Number(await redis.call('WAIT', 1, 1000)), 1);

  const key = 'replica-ack-test';
  const write = async () => {
    await redis.set(key, 'v');
    // The server drops this connection; ioredis connects again before WAIT is sent.
    const id = await redis.client('ID');
    await master.admin.client('KILL', 'ID', String(id));
    await eventually(async () => redis.status === 'ready' && (await redis.ping()) === 'PONG', { timeoutMs: 5000, intervalMs: 10 });
  };
  await t.throwsAsync(withReplicaAcks(redis, key, 1, Date.now() + 1000, write), { instanceOf: ReplicaAckError, message: /replaced/ });
  // The same write without a reconnect is acknowledged.
  t.is(await withReplicaAcks(redis, key, 1, Date.now() + 1000, () => redis.set(key, 'w')), 'OK');
});
