// A gateway whose PostgreSQL goes away or hangs: Identify and Profiles answer the JSON 500
// promptly (never hang, never leak internals) and recover by themselves once it is back.
import test, { type ExecutionContext } from 'ava';
import { queuedMessageIds } from '../helpers/batches.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startProxy, startFreezableProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL, type Tenant } from '../helpers/services.ts';
import { keyCreate } from '../../cli/commands/key.ts';

const INTERNAL = '{"error":"Internal error"}';
/** connectionTimeoutMillis is 3 s; a refused or hung PostgreSQL must not hold a caller much longer. */
const BOUND_MS = 6000;

interface Faultable {
  port: number;
  url(base: string): string;
  restore(): void;
  close(): Promise<void>;
}

type Timed = Reply & { ms: number };

/** A gateway on PostgreSQL through `proxy`, Redis direct; the tenant is made on a direct harness. */
async function pipeline(t: ExecutionContext, proxy: Faultable, env: Record<string, string> = {}) {
  t.teardown(() => proxy.close());
  const direct = await openHarness();
  t.teardown(() => direct.close());
  const tenant = await newTenant(direct);
  const gh = await openHarness({ DATABASE_URL: proxy.url(TEST_DATABASE_URL), QUEUE_PREFIX: direct.env.QUEUE_PREFIX, ...env });
  t.teardown(() => gh.close());
  const gateway = await gatewayInProcess(gh);
  t.teardown(() => gateway.close());
  const timed = async (path: string, options: Parameters<typeof request>[2], key = tenant.key): Promise<Timed> => {
    const started = performance.now();
    const reply = await request(gateway.url, path, { ...options, headers: { 'x-api-key': key }, timeoutMs: 30_000 });
    return { ...reply, ms: performance.now() - started };
  };
  let n = 0;
  const api = {
    identify: (userId = 'pg-user') => timed(`/api/identify/${tenant.slug}`, { body: { userId, traits: { n: ++n } } }),
    profile: (userId = 'pg-user') => timed(`/api/profiles/${tenant.slug}/${userId}`, { method: 'GET' }),
    track: (body = trackBody(), as: Tenant = tenant) => timed(`/api/track/${as.slug}`, { body }, as.key),
    health: (path: '/healthz' | '/readyz') => timed(path, { method: 'GET' }),
  };
  return { direct, tenant, api };
}

function expectInternal(t: ExecutionContext, r: Timed, what: string) {
  t.is(r.status, 500, `${what}: ${r.text}`);
  t.is(r.text, INTERNAL, `${what}: exactly the spec body, nothing internal`);
  t.regex(r.headers.get('content-type') ?? '', /^application\/json/);
  t.true(r.ms < BOUND_MS, `${what} answered in ${Math.round(r.ms)} ms, bound ${BOUND_MS} ms`);
}

/** Identify and Profiles, in sequence and a few at once, each a prompt 500. */
async function expectDown(t: ExecutionContext, api: Awaited<ReturnType<typeof pipeline>>['api'], label: string) {
  const replies: [string, Timed][] = [];
  replies.push(['identify', await api.identify()]);
  replies.push(['profile', await api.profile()]);
  const parallel = await Promise.all([api.identify(), api.identify('pg-other'), api.profile(), api.profile('pg-other')]);
  replies.push(...parallel.map((r, i): [string, Timed] => [i < 2 ? 'identify' : 'profile', r]));
  for (const [what, r] of replies) expectInternal(t, r, `${label} ${what}`);
  t.log(`${label}: slowest 500 in ${Math.round(Math.max(...replies.map(([, r]) => r.ms)))} ms`);
}

/** Polls until Identify and Profiles answer 200 again, without restarting anything. */
async function recovers(t: ExecutionContext, api: Awaited<ReturnType<typeof pipeline>>['api'], withinMs: number) {
  const started = Date.now();
  const ok = await eventually(
    async () => {
      const [i, p] = [await api.identify(), await api.profile()];
      for (const r of [i, p]) if (r.status !== 200) t.is(r.text, INTERNAL, 'while recovering, only the 500 of the spec');
      return i.status === 200 && p.status === 200;
    },
    { timeoutMs: withinMs, intervalMs: 250 },
  );
  t.true(ok, `Identify and Profiles answered 200 again within ${withinMs} ms`);
  t.log(`recovered ${Date.now() - started} ms after PostgreSQL came back`);
  const p = await api.profile();
  t.is(p.status, 200);
  t.is(p.json.user_id, 'pg-user');
}

test('PostgreSQL cut: Identify and Profiles answer the JSON 500 at once, then 200 again by themselves', async (t) => {
  const proxy = await startProxy(TEST_DATABASE_URL);
  const { api } = await pipeline(t, proxy);
  t.is((await api.identify()).status, 200);
  t.is((await api.profile()).status, 200);

  proxy.cut();
  await expectDown(t, api, 'cut');
  // The process is up but not ready, and says which dependency is missing.
  t.is((await api.health('/healthz')).status, 200);
  const ready = await api.health('/readyz');
  t.is(ready.status, 503);
  t.deepEqual(ready.json, { status: 'unavailable', postgres: false, redis: true });
  // Still prompt after a while of failed connection attempts.
  await sleep(1500);
  await expectDown(t, api, 'cut, later');

  proxy.restore();
  await recovers(t, api, 10_000);
  t.deepEqual((await api.health('/readyz')).json, { status: 'ready', postgres: true, redis: true });
});

test('PostgreSQL stalls on new connections: 500 within the bound, then 200 again', async (t) => {
  const proxy = await startProxy(TEST_DATABASE_URL);
  const { api } = await pipeline(t, proxy);
  t.is((await api.identify()).status, 200);
  t.is((await api.profile()).status, 200);

  proxy.stall();
  await expectDown(t, api, 'stall');

  proxy.restore();
  await recovers(t, api, 10_000);
});

test('PostgreSQL stops answering on open connections: 500 within the bound, then 200 again', async (t) => {
  const proxy = await startFreezableProxy(TEST_DATABASE_URL);
  const { api } = await pipeline(t, proxy);
  // Warm the pool: several connections open and idle.
  t.deepEqual(
    (await Promise.all([api.identify(), api.identify('pg-other')])).map((r) => r.status),
    [200, 200],
  );
  t.deepEqual(
    (await Promise.all([api.profile(), api.profile('pg-other'), api.profile(), api.profile('pg-other')])).map((r) => r.status),
    [200, 200, 200, 200],
  );

  proxy.freeze();
  await expectDown(t, api, 'freeze');

  proxy.restore();
  await recovers(t, api, 15_000);
});

/**
 * Track needs PostgreSQL only for the API-key lookup, which a gateway serves from memory while
 * its Redis subscription (the revocation channel) is up: fresh for KEY_CACHE_TTL_MS, and while
 * PostgreSQL is unreachable, stale until KEY_CACHE_STALE_MAX_MS after it was last read. So with
 * PostgreSQL away a cached key keeps getting 202 past its TTL (the event is in Redis, the worker
 * stores it later); a key this gateway has not looked up needs PostgreSQL and gets the JSON 500
 * (docs/decisions.md), as does a cached one past the stale bound. A key revoked meanwhile
 * without this gateway hearing of it is refused within about a second of PostgreSQL's return.
 */
test('Track while PostgreSQL is away: 202 for a cached key past its TTL up to the stale bound, 500 for an uncached key; a revocation it missed applies once PostgreSQL is back', async (t) => {
  const TTL_MS = 2000;
  const STALE_MAX_MS = 6000;
  const proxy = await startProxy(TEST_DATABASE_URL);
  const { direct, tenant, api } = await pipeline(t, proxy, { KEY_CACHE_TTL_MS: String(TTL_MS), KEY_CACHE_STALE_MAX_MS: String(STALE_MAX_MS) });
  const other = await newTenant(direct);
  const second = await keyCreate(direct.operator, [tenant.slug]);
  const revokedLater: Tenant = { ...tenant, key: second.key, suffix: second.suffix };
  // Lookups are cached only once the gateway's subscription is up, which is not awaited at start.
  await sleep(1000);
  t.is((await api.track()).status, 202);
  const cachedAt = Date.now();
  // The other key is read later, so it is still within its stale bound when PostgreSQL returns.
  await sleep(TTL_MS + 500);
  t.is((await api.track(trackBody(), revokedLater)).status, 202);

  proxy.cut();
  const accepted: string[] = [];
  for (let i = 0; i < 5; i++) {
    const body = trackBody({ properties: { i } });
    const r = await api.track(body);
    t.is(r.status, 202, `past its TTL, still accepted: ${r.text}`);
    t.deepEqual(r.json, { message_id: body.messageId, status: 'accepted' });
    t.true(r.ms < BOUND_MS);
    accepted.push(body.messageId as string);
  }
  t.true(Date.now() - cachedAt < STALE_MAX_MS, 'all sent within the stale bound');
  expectInternal(t, await api.track(trackBody(), other), 'track with a key not cached');
  expectInternal(t, await api.identify(), 'identify meanwhile');
  const queued = await queuedMessageIds(direct.operator.eventsQueue(), tenant.environmentId);
  for (const id of accepted) t.true(queued.has(id), 'the accepted event is in Redis');

  // Revoked where this gateway cannot see it (as by a `key revoke` that could not notify it).
  await direct.db.apiKey.updateMany({
    where: { environmentId: tenant.environmentId, suffix: second.suffix },
    data: { status: 'revoked', revokedAt: new Date() },
  });
  await sleep(cachedAt + STALE_MAX_MS + 300 - Date.now());
  expectInternal(t, await api.track(), 'track once the stale bound passed');
  t.is((await api.track(trackBody(), revokedLater)).status, 202, 'the revocation is not known here yet');

  proxy.restore();
  const restoredAt = Date.now();
  const refused = await eventually(async () => (await api.track(trackBody(), revokedLater)).status === 401, { timeoutMs: 10_000, intervalMs: 100 });
  const refusedMs = Date.now() - restoredAt;
  t.true(refused, 'the key revoked during the outage is refused once PostgreSQL is back');
  t.log(`revocation applied ${refusedMs} ms after PostgreSQL came back`);
  // About a second (one background read a second while PostgreSQL is unreachable), plus reconnecting on a loaded machine.
  t.true(refusedMs < 5000, `${refusedMs} ms`);
  const back = await eventually(async () => (await api.track()).status === 202 && (await api.track(trackBody(), other)).status === 202, {
    timeoutMs: 10_000,
    intervalMs: 250,
  });
  t.true(back, 'Track accepts both valid keys again');
});
