// intake users suppress and forget with the command's Redis cut (a proxy of the test's own):
// the change is made in PostgreSQL; suppress cannot confirm that the gateways heard, exits 1
// saying so, and still nothing of the user is stored (the worker and Identify check
// PostgreSQL); forget is done and says the live view could not be cleaned (null). Run again
// once Redis answers, suppress succeeds and the gateway drops the calls itself.
import test from 'ava';
import { identityHash } from '../../platform/identity-hash.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_REDIS_URL } from '../helpers/services.ts';
import { intake } from '../security/cli.ts';

test('with its Redis cut, suppress exits 1 saying what was done and what to do, and nothing is stored anyway; forget is done; run again, suppress succeeds', async (t) => {
  const h = await openHarness({ WORKER_BATCH_WAIT_MS: '2' });
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h, { ownPool: true });
  t.teardown(() => gateway.close());
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const tenant = await newTenant(h);
  const headers = { 'x-api-key': tenant.key };
  const identify = (body: Record<string, unknown>) => request(gateway.url, `/api/identify/${tenant.slug}`, { headers, body });
  const track = (body: Record<string, unknown>) => request(gateway.url, `/api/track/${tenant.slug}`, { headers, body: trackBody(body) });
  t.is((await identify({ userId: 'una', traits: { plan: 'free' } })).status, 200);
  t.is((await identify({ userId: 'vic', traits: { plan: 'free' } })).status, 200);

  const proxy = await startProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  proxy.cut();
  const cut = { ...h.env, REDIS_URL: proxy.url(TEST_REDIS_URL) };
  const [suppress, forget] = await Promise.all([intake(cut, ['users', 'suppress', tenant.slug, 'una']), intake(cut, ['users', 'forget', tenant.slug, 'vic'])]);
  t.is(suppress.code, 1, suppress.stderr);
  t.is(suppress.stdout, '');
  t.is(suppress.stderr.trimEnd().split('\n').length, 1);
  t.regex(
    suppress.stderr,
    /^intake: user suppressed in the database, but the gateways were not notified \(Redis unreachable within 10 s\): .* for up to 30 s \(SUPPRESSION_REFRESH_MS\); workers and Identify check the database, so nothing received since is stored; run the command again to notify them\n$/,
  );
  t.is(forget.code, 0, forget.stderr);
  t.like(JSON.parse(forget.stdout), { liveViewEntries: null, removed: { profiles: 1 } });

  // The gateway was not told: it accepts una's calls, and nothing of them is stored.
  for (let n = 0; n < 3; n++) {
    t.is((await identify({ userId: 'una', messageId: `una-${n}`, traits: { plan: 'pro' } })).status, 200);
    t.is((await track({ userId: 'una', messageId: `una-t-${n}` })).status, 202);
  }
  await track({ userId: 'other', messageId: 'other' });
  await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'other' } })) === 1);
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'una' } }), 0);
  const profile = await request(gateway.url, `/api/profiles/${tenant.slug}/una`, { method: 'GET', headers });
  t.deepEqual(profile.json.fields, { plan: 'free' });
  // Counted where dropped: the worker's Track counts at once, the gateway's Identify counts on its next write of them.
  const counts = async () =>
    h.db.privacyUser.findUniqueOrThrow({ where: { environmentId_userHash: { environmentId: tenant.environmentId, userHash: identityHash('una') } } });
  await eventually(async () => Number((await counts()).droppedIdentify) >= 3, { timeoutMs: 10_000 });
  const row = await counts();
  t.is(Number(row.droppedTrack), 3);
  t.is(Number(row.droppedIdentify), 3);

  proxy.restore();
  const again = await intake(cut, ['users', 'suppress', tenant.slug, 'una']);
  t.is(again.code, 0, again.stderr);
  t.like(JSON.parse(again.stdout), { changed: false });
  // Told now: the gateway drops the call itself and counts it.
  t.is((await track({ userId: 'una', messageId: 'una-told' })).status, 202);
  const metrics = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
  t.is(metrics.get(series('intake_suppressed_calls_total', { api: 'track', environment: tenant.slug })), 1);
});
