// API keys sent by anyone must not cost a valid key its place in a gateway's memory. A gateway
// on a small KEY_CACHE_MB, with PostgreSQL behind a proxy of the test's own: an unknown key is
// remembered (sent again, it costs no query); a flood of random keys pushes out only other
// unknown keys; with PostgreSQL then cut, the valid key is still served from memory.
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { generateApiKey } from '../../environments/api-key.ts';
import { sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL } from '../helpers/services.ts';

const FLOOD = 2000;

test('a flood of random keys never evicts a valid one; an unknown key is remembered, within its share of KEY_CACHE_MB', async (t) => {
  const proxy = await startProxy(TEST_DATABASE_URL);
  t.teardown(() => proxy.close());
  const direct = await openHarness();
  t.teardown(() => direct.close());
  const tenant = await newTenant(direct);
  // 1 MB: a quarter for refused keys, about 1,300 of them.
  const gh = await openHarness({ DATABASE_URL: proxy.url(TEST_DATABASE_URL), QUEUE_PREFIX: direct.env.QUEUE_PREFIX, KEY_CACHE_MB: '1' });
  t.teardown(() => gh.close());
  const gateway = await gatewayInProcess(gh);
  t.teardown(() => gateway.close());
  const track = (key: string) => request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': key }, body: trackBody() });
  // Lookups are cached only once the gateway's subscription is up, which is not awaited at start.
  await sleep(1000);

  t.is((await track(tenant.key)).status, 202);
  const guess = generateApiKey();
  t.is((await track(guess)).status, 401);
  proxy.resetRoundTrips();
  t.is((await track(guess)).status, 401);
  t.is(proxy.roundTrips(), 0, 'an unknown key sent again costs no query');

  const statuses: Record<number, number> = {};
  for (let i = 0; i < FLOOD; i += 50) {
    const replies = await Promise.all(Array.from({ length: 50 }, () => track(`itk_${randomBytes(30).toString('base64url').slice(0, 40)}`)));
    for (const r of replies) statuses[r.status] = (statuses[r.status] ?? 0) + 1;
  }
  t.deepEqual(statuses, { 401: FLOOD });

  proxy.cut();
  const served = await track(tenant.key);
  t.is(served.status, 202, `the valid key is still in memory: ${served.text}`);
  t.is((await track(guess)).status, 500, 'the first guess was pushed out by later ones (and needs PostgreSQL again)');
});
