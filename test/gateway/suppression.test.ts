// intake users suppress / unsuppress through two real gateways and a worker: a suppressed user's
// calls answer as the contract says and are stored nowhere, counted per environment; a gateway
// that has not heard of a suppression still stores nothing (the worker and Identify check
// PostgreSQL); after unsuppress calls are stored again.
import test from 'ava';
import { usersAudit, usersForget, usersSuppress, usersSuppressed, usersUnsuppress } from '../../cli/commands/users.ts';
import { identityHash } from '../../platform/identity-hash.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { gatewayInProcess, workerInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateways: InProcessGateway[] = [];
let worker: Awaited<ReturnType<typeof workerInProcess>>;

test.before(async () => {
  h = await openHarness({ WORKER_BATCH_WAIT_MS: '2' });
  gateways = [await gatewayInProcess(h, { ownPool: true }), await gatewayInProcess(h, { ownPool: true })];
  worker = await workerInProcess(h);
});

test.after.always(async () => {
  await worker?.close();
  for (const g of gateways) await g.close();
  await h?.close();
});

const headers = (tenant: Tenant) => ({ 'x-api-key': tenant.key });
const identify = (g: InProcessGateway, tenant: Tenant, body: Record<string, unknown>) =>
  request(g.url, `/api/identify/${tenant.slug}`, { headers: headers(tenant), body });
const track = (g: InProcessGateway, tenant: Tenant, body: Record<string, unknown>) =>
  request(g.url, `/api/track/${tenant.slug}`, { headers: headers(tenant), body: trackBody(body) });

const queueEmpty = async () => {
  const c = await h.operator.eventsQueue().getJobCounts('wait', 'active', 'delayed', 'prioritized');
  return Object.values(c).every((n) => n === 0);
};
const eventsOf = (tenant: Tenant, userId: string) => h.db.event.count({ where: { environmentId: tenant.environmentId, userId } });
const traitsOf = async (tenant: Tenant, userId: string) => {
  const reply = await request(gateways[0].url, `/api/profiles/${tenant.slug}/${userId}`, { method: 'GET', headers: headers(tenant) });
  return reply.status === 200 ? reply.json.fields : null;
};
const suppressedMetric = async (g: InProcessGateway, api: string, tenant: Tenant) =>
  samples((await request(g.url, '/metrics', { method: 'GET' })).text).get(series('intake_suppressed_calls_total', { api, environment: tenant.slug })) ?? 0;

test.serial('100 calls of a suppressed user answer 200 / 202 as usual, are stored nowhere and are counted; after unsuppress they are stored', async (t) => {
  const tenant = await newTenant(h);
  t.is((await identify(gateways[0], tenant, { userId: 'sam', traits: { plan: 'free' } })).status, 200);
  const suppressed = await usersSuppress(h.operator, [tenant.slug, ' sam ', '--by', 'dpo']);
  t.like(suppressed, { changed: true });
  // The audit's keyed hash, not the plain SHA-256 of the ID that anyone could compute.
  t.regex(suppressed.userHash, /^[0-9a-f]{64}$/);
  t.not(suppressed.userHash, identityHash('sam').toString('hex'));
  // Suppressing again changes nothing and keeps the first time.
  t.like(await usersSuppress(h.operator, [tenant.slug, 'sam']), { changed: false, suppressedAt: suppressed.suppressedAt });

  // Half through each gateway: the command returned only once both had the new set.
  for (let n = 0; n < 50; n++) {
    const g = gateways[n % 2];
    const id = await identify(g, tenant, { userId: 'sam', messageId: `sam-i-${n}`, traits: { plan: 'pro', n } });
    t.is(id.status, 200);
    t.deepEqual(id.json, { success: true, messageId: `sam-i-${n}`, duplicate: false });
    const tr = await track(g, tenant, { userId: n % 3 ? 'sam' : ' sam', messageId: `sam-t-${n}` });
    t.is(tr.status, 202);
    t.deepEqual(tr.json, { message_id: `sam-t-${n}`, status: 'accepted' });
  }
  // An Identify without a messageId gets a generated one, as a stored call does.
  const generated = await identify(gateways[0], tenant, { userId: 'sam', traits: { x: 1 } });
  t.regex(generated.json.messageId, /^[0-9a-f-]{36}$/);
  // A bad call still gets its 400: suppression comes after every check.
  t.is((await identify(gateways[0], tenant, { userId: 'sam' })).status, 400);

  await track(gateways[0], tenant, { userId: 'other', messageId: 'other-1' });
  await eventually(async () => (await eventsOf(tenant, 'other')) === 1);
  await eventually(queueEmpty);
  t.is(await eventsOf(tenant, 'sam'), 0);
  t.is(await eventsOf(tenant, ' sam'), 0);
  t.deepEqual(await traitsOf(tenant, 'sam'), { plan: 'free' });

  const identifyCounted = (await suppressedMetric(gateways[0], 'identify', tenant)) + (await suppressedMetric(gateways[1], 'identify', tenant));
  const trackCounted = (await suppressedMetric(gateways[0], 'track', tenant)) + (await suppressedMetric(gateways[1], 'track', tenant));
  t.is(identifyCounted, 51);
  t.is(trackCounted, 50);
  const listed = await eventually(async () => {
    const [row] = await usersSuppressed(h.operator, [tenant.slug]);
    return row && row.dropped.identify + row.dropped.track === 101 ? row : null;
  });
  t.like(listed, { userHash: suppressed.userHash, dropped: { identify: 51, track: 50 } });

  t.like(await usersUnsuppress(h.operator, [tenant.slug, 'sam']), { changed: true, userHash: suppressed.userHash });
  t.deepEqual(await usersSuppressed(h.operator, [tenant.slug]), []);
  t.is((await identify(gateways[1], tenant, { userId: 'sam', traits: { plan: 'team' } })).status, 200);
  t.is((await track(gateways[1], tenant, { userId: 'sam', messageId: 'sam-after' })).status, 202);
  await eventually(async () => (await eventsOf(tenant, 'sam')) === 1);
  t.like(await traitsOf(tenant, 'sam'), { plan: 'team' });
  t.is(await eventsOf(tenant, 'sam'), 1, 'nothing dropped meanwhile came back');

  const audit = await usersAudit(h.operator, [tenant.slug]);
  // The second suppress changed nothing, so it left no record.
  t.deepEqual(
    audit.map((a) => [a.action, a.operator, a.userHash]),
    [
      ['suppress', 'dpo', suppressed.userHash],
      ['unsuppress', audit[1].operator, suppressed.userHash],
    ],
  );
  t.false(JSON.stringify(audit).includes('sam'));
});

test.serial('a suppression the gateways have not heard of: the worker and Identify still store nothing received after it', async (t) => {
  const tenant = await newTenant(h);
  await identify(gateways[0], tenant, { userId: 'tim', traits: { plan: 'free' } });
  // Written as the command writes it, but no gateway is told (as for one whose subscription was down).
  await h.db.$executeRawUnsafe(
    `INSERT INTO privacy_users (environment_id, user_hash, suppressed_at) VALUES ($1::uuid, $2, floor(extract(epoch FROM clock_timestamp()) * 1000)::int8)`,
    tenant.environmentId,
    identityHash('tim'),
  );
  await sleep(5);
  for (let n = 0; n < 5; n++) {
    t.is((await track(gateways[n % 2], tenant, { userId: 'tim', messageId: `tim-${n}` })).status, 202);
    t.is((await identify(gateways[n % 2], tenant, { userId: 'tim', messageId: `tim-i-${n}`, traits: { plan: 'pro' } })).status, 200);
  }
  await track(gateways[0], tenant, { userId: 'other', messageId: 'other-2' });
  await eventually(async () => (await eventsOf(tenant, 'other')) === 1);
  await eventually(queueEmpty);
  t.is(await eventsOf(tenant, 'tim'), 0);
  t.deepEqual(await traitsOf(tenant, 'tim'), { plan: 'free' });
  const row = await eventually(async () => {
    const [first] = await usersSuppressed(h.operator, [tenant.slug]);
    return first?.dropped.track === 5 && first?.dropped.identify === 5 ? first : null;
  });
  t.like(row, { dropped: { identify: 5, track: 5 } });
});

test.serial('forget --suppress: 100 later calls answer 200 / 202, store nothing, and the counters say 100', async (t) => {
  const tenant = await newTenant(h);
  await identify(gateways[0], tenant, { userId: 'zoe', traits: { plan: 'free' } });
  await track(gateways[0], tenant, { userId: 'zoe', messageId: 'zoe-before' });
  await eventually(async () => (await eventsOf(tenant, 'zoe')) === 1);
  const summary = await usersForget(h.operator, [tenant.slug, 'zoe', '--suppress']);
  t.like(summary, { suppressed: true, removed: { profiles: 1, events: 1 } });
  for (let n = 0; n < 50; n++) {
    t.is((await identify(gateways[n % 2], tenant, { userId: 'zoe', messageId: `zoe-i-${n}`, traits: { n } })).status, 200);
    t.is((await track(gateways[n % 2], tenant, { userId: 'zoe', messageId: `zoe-t-${n}` })).status, 202);
  }
  await track(gateways[0], tenant, { userId: 'other', messageId: 'other-3' });
  await eventually(async () => (await eventsOf(tenant, 'other')) === 1);
  await eventually(queueEmpty);
  t.is(await eventsOf(tenant, 'zoe'), 0);
  t.is(await traitsOf(tenant, 'zoe'), null);
  let counted = 0;
  for (const g of gateways) for (const api of ['identify', 'track']) counted += await suppressedMetric(g, api, tenant);
  t.is(counted, 100);
  const row = await eventually(async () => {
    const [first] = await usersSuppressed(h.operator, [tenant.slug]);
    return first && first.dropped.identify + first.dropped.track === 100 ? first : null;
  });
  t.like(row, { dropped: { identify: 50, track: 50 } });
});
