// Operator commands that change what gateways cache (key revoke, env remove, org features) tell
// every gateway through Redis and wait for each to confirm. With the command's Redis cut (a
// proxy of the test's own), or a gateway that never confirms, the change is made but the
// command says it could not tell them: exit 1, one line on stderr, nothing on stdout. Run again
// once Redis answers, it tells them and succeeds, and the gateway refuses the key at once.
import test, { type ExecutionContext } from 'ava';
import { Redis } from 'ioredis';
import { authCacheChannels } from '../../platform/queue-keys.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newEnvironment, newTenant, openHarness, TEST_REDIS_URL, type Harness } from '../helpers/services.ts';
import { intake, type CliRun } from '../security/cli.ts';

const INVALID = { error: 'Invalid API key' };

/**
 * A harness and an in-process gateway on it (Redis direct), once the gateway hears
 * invalidations. Its cached lookups last 10 minutes, so what it serves while not told does not
 * depend on how long the commands take on a loaded machine; the commands run with the default
 * KEY_CACHE_TTL_MS, which their message names.
 */
async function withGateway(t: ExecutionContext) {
  const h = await openHarness();
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess({ ...h, config: { ...h.config, keyCacheTtlMs: 600_000 } });
  t.teardown(() => gateway.close());
  await subscribers(t, h, 1);
  return { h, gateway };
}

/** Waits until `count` connections listen on the harness's invalidation channel. */
async function subscribers(t: ExecutionContext, h: Harness, count: number) {
  const redis = new Redis(TEST_REDIS_URL);
  const channel = authCacheChannels(h.config).invalidate;
  try {
    const ok = await eventually(async () => ((await redis.pubsub('NUMSUB', channel)) as [string, number])[1] === count, { timeoutMs: 10_000 });
    t.true(ok, `${count} subscriber(s) on ${channel}`);
  } finally {
    redis.disconnect();
  }
}

const track = (url: string, slug: string, key: string, headers: Record<string, string> = {}) =>
  request(url, `/api/track/${slug}`, { headers: { 'x-api-key': key, ...headers }, body: trackBody() });

/** A failed notification: exit 1, no JSON document, one line naming the change and what to do. */
function expectNotNotified(t: ExecutionContext, run: CliRun, done: RegExp, problem: RegExp) {
  t.is(run.code, 1, run.stderr);
  t.is(run.stdout, '');
  const lines = run.stderr.trimEnd().split('\n');
  t.is(lines.length, 1, run.stderr);
  t.regex(lines[0], done);
  t.regex(lines[0], /in the database, but the gateways were not notified/);
  t.regex(lines[0], problem);
  t.regex(lines[0], /for up to 30 s \(KEY_CACHE_TTL_MS; .*\); run the command again to notify them$/);
}

test('with its Redis cut, key revoke, env remove and org features exit 1 saying what was done and what to do; run again, they succeed', async (t) => {
  const { h, gateway } = await withGateway(t);
  const tenant = await newTenant(h);
  const env = await newEnvironment(h, tenant);
  const envHeaders = { 'x-service-environment': env.envKey };
  // The gateway caches both keys.
  t.is((await track(gateway.url, tenant.slug, tenant.key)).status, 202);
  t.is((await track(gateway.url, env.pathValue, env.key, envHeaders)).status, 202);

  const proxy = await startProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  proxy.cut();
  const cut = { ...h.env, REDIS_URL: proxy.url(TEST_REDIS_URL) };
  const started = Date.now();
  const [revoke, remove, features, create] = await Promise.all([
    intake(cut, ['key', 'revoke', tenant.slug, tenant.suffix]),
    intake(cut, ['env', 'remove', tenant.slug, env.pathValue]),
    intake(cut, ['org', 'features', tenant.slug, '--set', 'join-by-email']),
    intake(cut, ['key', 'create', tenant.slug]),
  ]);
  t.log(`the three failed in ${Date.now() - started} ms (bound 10 s, and the commands' start)`);
  const unreachable = /\(Redis unreachable within 10 s\)/;
  expectNotNotified(t, revoke, new RegExp(`^intake: key ${tenant.suffix} revoked`), unreachable);
  expectNotNotified(t, remove, new RegExp(`^intake: environment ${env.pathValue} removed`), unreachable);
  expectNotNotified(t, features, new RegExp(`^intake: features of ${tenant.slug} set`), unreachable);
  // A new key needs no gateway told (no gateway can have cached its hash): it works without Redis.
  t.is(create.code, 0, create.stderr);
  t.is(JSON.parse(create.stdout).status, 'active');

  // What the line says: the changes are made...
  t.is((await h.db.apiKey.findFirstOrThrow({ where: { environmentId: tenant.environmentId, suffix: tenant.suffix } })).status, 'revoked');
  t.not((await h.db.environment.findUniqueOrThrow({ where: { id: env.environmentId } })).removedAt, null);
  t.deepEqual((await h.db.organization.findUniqueOrThrow({ where: { slug: tenant.slug } })).features, ['join-by-email']);
  // ...and the gateway, not told, still serves what it cached.
  t.is((await track(gateway.url, tenant.slug, tenant.key)).status, 202);
  t.is((await track(gateway.url, env.pathValue, env.key, envHeaders)).status, 202);

  proxy.restore();
  const again = await Promise.all([
    intake(cut, ['key', 'revoke', tenant.slug, tenant.suffix]),
    intake(cut, ['env', 'remove', tenant.slug, env.pathValue]),
    intake(cut, ['org', 'features', tenant.slug, '--set', 'join-by-email']),
  ]);
  for (const run of again) t.is(run.code, 0, run.stderr);
  t.deepEqual(JSON.parse(again[0].stdout), { suffix: tenant.suffix, status: 'revoked' });
  // Told now: refused at once.
  const revoked = await track(gateway.url, tenant.slug, tenant.key);
  t.is(revoked.status, 401);
  t.deepEqual(revoked.json, INVALID);
  t.is((await track(gateway.url, env.pathValue, env.key, envHeaders)).status, 403);
});

test('a gateway that hears the invalidation but never confirms: key revoke exits 1 naming how many did not', async (t) => {
  const { h, gateway } = await withGateway(t);
  const tenant = await newTenant(h);
  t.is((await track(gateway.url, tenant.slug, tenant.key)).status, 202);
  // A listener that never acks, as a gateway stuck in a long pause would.
  const mute = new Redis(TEST_REDIS_URL);
  t.teardown(() => mute.disconnect());
  await mute.subscribe(authCacheChannels(h.config).invalidate);
  await subscribers(t, h, 2);

  const run = await intake(h.env, ['key', 'revoke', tenant.slug, tenant.suffix]);
  expectNotNotified(t, run, new RegExp(`^intake: key ${tenant.suffix} revoked`), /\(1 of 2 gateways did not confirm within 10 s\)/);
  // The gateway that did confirm refuses the key already.
  t.deepEqual((await track(gateway.url, tenant.slug, tenant.key)).json, INVALID);
});
