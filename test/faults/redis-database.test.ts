// The tests honour their Redis configuration: a URL derived for a proxy (or handed to a child
// process) keeps TEST_REDIS_URL's database number and credentials. A gateway in this process
// and one as a child process, both through a proxy, on a non-zero database: their keys are
// there, and database 0 holds none of them.
import test from 'ava';
import { Redis } from 'ioredis';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake, workerInProcess } from '../helpers/processes.ts';
import { startProxy, throughProxy } from '../helpers/proxy.ts';
import { closeEmptied, newTenant, openHarness, TEST_REDIS_URL } from '../helpers/services.ts';

/** TEST_REDIS_URL's database when it names a non-zero one, else database 15 of the same server. */
function nonZeroDatabase(): { url: string; db: number } {
  const url = new URL(TEST_REDIS_URL);
  const named = Number(url.pathname.slice(1) || 0);
  const db = named > 0 ? named : 15;
  url.pathname = `/${db}`;
  return { url: url.toString(), db };
}

/** Every key of `prefix` in database `db` of TEST_REDIS_URL's server. */
async function keysIn(db: number, prefix: string): Promise<string[]> {
  const url = new URL(TEST_REDIS_URL);
  url.pathname = `/${db}`;
  const redis = new Redis(url.toString(), { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
      keys.push(...found);
      cursor = next;
    } while (cursor !== '0');
    return keys;
  } finally {
    redis.disconnect();
  }
}

test('a derived URL keeps the scheme, credentials, database and query; only host and port change', (t) => {
  t.is(throughProxy('redis://:s3cret@redis.internal:6380/13', 4321), 'redis://:s3cret@127.0.0.1:4321/13');
  t.is(throughProxy('rediss://ops:pw@10.1.2.3/2?family=4', 4321), 'rediss://ops:pw@127.0.0.1:4321/2?family=4');
  t.is(
    throughProxy('postgresql://app:pw@db:5433/intake_test_x?sslmode=disable&host=/var/run/postgresql', 4321),
    'postgresql://app:pw@127.0.0.1:4321/intake_test_x?sslmode=disable',
  );
});

test('a proxied gateway, worker and child gateway on a non-zero Redis database write nothing to database 0', async (t) => {
  t.timeout(120_000);
  const { url, db } = nonZeroDatabase();
  const proxy = await startProxy(url);
  t.teardown(() => proxy.close());
  const h = await openHarness({ REDIS_URL: proxy.url(url) });
  t.teardown(() => closeEmptied(h));
  t.is(new URL(h.config.redisUrl).pathname, `/${db}`, 'the proxied URL keeps the database');

  const tenant = await newTenant(h);
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const child = await spawnIntake('gateway', h.env);
  t.teardown(() => child.kill('SIGKILL'));

  const headers = { 'x-api-key': tenant.key };
  const sent = [trackBody(), trackBody()];
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers, body: sent[0] })).status, 202);
  t.is((await request(child.url, `/api/track/${tenant.slug}`, { headers, body: sent[1] })).status, 202);
  const stored = await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 2, { timeoutMs: 60_000 });
  t.true(stored, 'both events stored by the worker through the proxy');

  const prefix = h.env.QUEUE_PREFIX;
  t.true((await keysIn(db, prefix)).length > 0, `the queue's keys are in database ${db}`);
  t.deepEqual(await keysIn(0, prefix), [], 'database 0 holds none of them');
});
