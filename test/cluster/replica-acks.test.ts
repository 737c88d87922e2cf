// REDIS_MIN_REPLICA_ACKS on one Redis with a replica of its own (redis-server processes started
// here): a 202 comes only once the replica holds the batch, a Redis with no replica answers 503
// within the enqueue bound, and a write whose connection was replaced before WAIT is not
// acknowledged (WAIT on a fresh connection covers none of its writes and answers at once).
import test from 'ava';
import { createLogger } from '../../common/logger.ts';
import { ReplicaAckError, withReplicaAcks } from '../../common/replica-ack.ts';
import { createRedis, type SingleRedis } from '../../common/redis.ts';
import { startGateway } from '../../gateway/server.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
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
