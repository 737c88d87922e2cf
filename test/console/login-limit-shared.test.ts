// Failed logins are counted in Redis, shared by every dashboard process of a deployment: two
// `intake dashboard` processes on the same Redis and PostgreSQL give a name 5 failures in all,
// the 6th is refused (429) on either, and the refusal survives a dashboard's restart. A right
// password clears its name's count. A dashboard that cannot reach Redis refuses logins (503)
// rather than let them through uncounted.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { loginLimitKeys } from '../../gateway/console/login-limit.ts';
import { createDb, type Db } from '../../platform/db.ts';
import { createRedis, type Redis } from '../../platform/redis.ts';
import { call, consoleDatabase } from '../helpers/console.ts';
import { freePort } from '../helpers/free-port.ts';
import { spawnIntake, type Child } from '../helpers/processes.ts';
import { testConfig, testEnv } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
let env: Record<string, string>;
let db: Db;
let redis: Redis;
const children: Child[] = [];

test.before(async () => {
  env = testEnv({ DATABASE_URL: await consoleDatabase('login_limit_shared'), DASHBOARD_PORT: '0' });
  db = createDb(testConfig(env));
  redis = createRedis(testConfig(env), 'worker');
  await addOperator(db, 'bob', 'admin', PASSWORD);
  await addOperator(db, 'carol', 'admin', PASSWORD);
});
test.after.always(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  const keys = await redis.keys(`${env.QUEUE_PREFIX}:login:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
  await db?.$disconnect();
});

async function dashboard(overrides: Record<string, string> = {}): Promise<Child> {
  const child = await spawnIntake('dashboard', { ...env, ...overrides });
  children.push(child);
  return child;
}

const login = (child: Child, name: string, password: string) =>
  call(child.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name, password } });

test.serial('5 failed logins of a name spread over two dashboards: the 6th is refused on either, and after a restart', async (t) => {
  const [a, b] = await Promise.all([dashboard(), dashboard()]);
  for (const [i, child] of [a, b, a, b, a].entries()) t.is((await login(child, 'bob', `wrong ${i}`)).status, 401, `attempt ${i + 1}`);
  for (const child of [a, b]) {
    const refused = await login(child, 'bob', PASSWORD);
    t.is(refused.status, 429);
    t.deepEqual(refused.json, { error: 'Too many failed logins: try again later' });
    t.true(Number(refused.headers.get('retry-after')) > 800);
  }
  // The count is in Redis, in a fixed window of 15 minutes under the queue prefix.
  const keys = loginLimitKeys(testConfig(env), '127.0.0.1', 'bob');
  t.is(await redis.get(keys.name), '5');
  const ttl = await redis.pttl(keys.name);
  t.true(ttl > 0 && ttl <= 15 * 60_000, String(ttl));

  await b.kill('SIGKILL');
  const c = await dashboard();
  t.is((await login(c, 'bob', PASSWORD)).status, 429, 'a restarted dashboard still refuses');
  // The same address is not held back for another name (6 failures of 20).
  t.is((await login(c, 'carol', PASSWORD)).status, 200);
});

test.serial("a right password clears its name's failures on every dashboard", async (t) => {
  const [a, b] = children.filter((c) => c.process.exitCode === null && c.process.signalCode === null);
  for (let i = 0; i < 4; i++) t.is((await login(a, 'carol', `wrong ${i}`)).status, 401);
  t.is((await login(b, 'carol', PASSWORD)).status, 200);
  for (let i = 0; i < 4; i++) t.is((await login(b, 'carol', `wrong again ${i}`)).status, 401);
  t.is((await login(a, 'carol', PASSWORD)).status, 200, '4 failures since the right password: not refused');
});

test.serial('a dashboard that cannot reach Redis refuses logins (503), the right password included', async (t) => {
  const away = await dashboard({ REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
  const refused = await login(away, 'carol', PASSWORD);
  t.is(refused.status, 503);
  t.regex(refused.json.error, /cannot reach Redis/);
  t.is(refused.headers.get('set-cookie'), null);
});
