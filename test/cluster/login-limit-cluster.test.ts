// Failed logins on a Redis Cluster (three masters, three replicas, started by the test): two
// dashboards on the cluster share the counts as on one Redis, and the two keys each login's
// script touches (its address's and its name's) share the hash tag `{<prefix>:login}`, so the
// script runs on one node.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { loginLimitKeys } from '../../gateway/console/login-limit.ts';
import { keySlot } from '../../platform/queue-keys.ts';
import { createRedis, type Redis } from '../../platform/redis.ts';
import { call, consoleDatabase, consoleInProcess } from '../helpers/console.ts';
import { startRedisCluster, type OwnCluster } from '../helpers/redis-cluster.ts';
import { testConfig, testEnv } from '../helpers/services.ts';
import { createDb } from '../../platform/db.ts';

const PASSWORD = 'correct horse battery staple';
let cluster: OwnCluster;
let env: Record<string, string>;
let redis: Redis;
const opened: { close(): Promise<unknown> }[] = [];

test.before(async () => {
  cluster = await startRedisCluster(3);
  env = testEnv({ DATABASE_URL: await consoleDatabase('login_limit_cluster'), REDIS_CLUSTER_NODES: cluster.nodes });
  const db = createDb(testConfig(env));
  await addOperator(db, 'bob', 'admin', PASSWORD);
  await db.$disconnect();
  redis = createRedis(testConfig(env), 'worker');
});
test.after.always(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => {});
  redis?.disconnect();
  await cluster?.close();
});

test('5 failed logins of a name spread over two dashboards on a cluster: the 6th is refused on either', async (t) => {
  const boards = [await consoleInProcess(env), await consoleInProcess(env)];
  opened.push(...boards);
  const login = (url: string, password: string) =>
    call(url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name: 'bob', password } });
  for (let i = 0; i < 5; i++) t.is((await login(boards[i % 2].url, `wrong ${i}`)).status, 401);
  for (const board of boards) t.is((await login(board.url, PASSWORD)).status, 429);
  const keys = loginLimitKeys(testConfig(env), '127.0.0.1', 'bob');
  t.true(keys.name.startsWith(`{${env.QUEUE_PREFIX}:login}:`));
  t.is(keySlot(keys.address), keySlot(keys.name));
  t.is(await redis.get(keys.name), '5');
  t.is(await redis.get(keys.address), '5');
});
