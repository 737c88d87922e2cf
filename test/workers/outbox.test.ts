// The transactional outbox: Identify writes its service events (profile_fields_changed,
// subscription_changed) in the same transaction as the change, and the worker's relay moves
// them to the service-events queue, once per row, however long Redis is away.
//
// This file runs on its own database. The outbox is not partitioned by queue prefix: a worker
// of any other test file running at the same time would relay this file's rows into its own
// queue (and this file's worker theirs), so rows must be invisible to other files' workers.
import test, { type ExecutionContext } from 'ava';
import type { Queue } from 'bullmq';
import { createServiceEventsQueue, type ServiceEventJob } from '../../events/jobs.ts';
import { createRedis } from '../../platform/redis.ts';
import { SERVICE_EVENTS } from '../../identify/outbox.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, type Reply } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { type Harness, newTenant, openHarness, ownDatabase, type Tenant, TEST_REDIS_URL } from '../helpers/services.ts';

let OUTBOX_DATABASE_URL: string;
const BASE = Date.parse('2024-05-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

let h: Harness;
let gateway: { url: string; close(): Promise<void> };

test.before(async () => {
  OUTBOX_DATABASE_URL = await ownDatabase('outbox');
  h = await openHarness({ DATABASE_URL: OUTBOX_DATABASE_URL });
  gateway = await gatewayInProcess(h);
});

test.after.always(async () => {
  await gateway?.close();
  await h?.close();
});

function identify(tenant: Tenant, body: Record<string, unknown>): Promise<Reply> {
  return request(gateway.url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
}

async function applied(t: ExecutionContext, tenant: Tenant, body: Record<string, unknown>, duplicate = false): Promise<string> {
  const r = await identify(tenant, body);
  t.is(r.status, 200, r.text);
  t.is(r.json.duplicate, duplicate);
  return r.json.messageId;
}

const rowsOf = (tenant: Tenant) => h.db.outboxEvent.findMany({ where: { environmentId: tenant.environmentId }, orderBy: { id: 'asc' } });

async function profileIdOf(tenant: Tenant, userId: string): Promise<string> {
  const link = await h.db.profileUser.findFirstOrThrow({ where: { environmentId: tenant.environmentId, userId } });
  return link.profileId;
}

/** The service-events queue of `prefix`, looked into over a direct Redis connection. */
function serviceQueue(t: ExecutionContext, prefix: string): Queue<ServiceEventJob> {
  const connection = createRedis({ redisUrl: TEST_REDIS_URL }, 'worker');
  const queue = createServiceEventsQueue({ ...h.config, queuePrefix: prefix }, connection);
  t.teardown(async () => {
    await queue.close().catch(() => {});
    connection.disconnect();
  });
  return queue;
}

const ALL_STATES = ['completed', 'failed', 'active', 'wait', 'delayed', 'prioritized', 'paused', 'waiting-children'] as const;

async function jobsOf(queue: Queue<ServiceEventJob>, tenant: Tenant) {
  const jobs = await queue.getJobs([...ALL_STATES]);
  return jobs.filter((j) => j?.data.environmentId === tenant.environmentId);
}

async function allRelayed(tenant: Tenant, count: number, timeoutMs = 15_000): Promise<boolean> {
  return eventually(
    async () => {
      const rows = await rowsOf(tenant);
      return rows.length === count && rows.every((r) => r.relayedAt !== null);
    },
    { timeoutMs },
  );
}

test.serial('a trait change writes one profile_fields_changed row, a consent change a subscription_changed row, before the 200', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const userId = 'outbox-user';

  const first = await applied(t, tenant, {
    userId,
    timestamp: iso(BASE),
    traits: { plan: 'free', email: ' Ada@Example.com ' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: BASE }],
  });
  // Read at once: the 200 came after the commit that wrote the rows.
  let rows = await rowsOf(tenant);
  t.deepEqual(
    rows.map((r) => r.kind),
    [SERVICE_EVENTS.profileFieldsChanged, SERVICE_EVENTS.subscriptionChanged],
  );
  const profileId = await profileIdOf(tenant, userId);
  t.deepEqual(JSON.parse(rows[0].payload), { userId, profileId, messageId: first, at: BASE, changed: { plan: 'free', email: ' Ada@Example.com ' } });
  t.deepEqual(JSON.parse(rows[1].payload), {
    userId,
    profileId,
    messageId: first,
    channel: 'email',
    purpose: 'marketing',
    address: 'ada@example.com',
    status: 'granted',
    decidedAt: BASE,
    expiresAt: null,
  });

  // Only the traits whose value changed are listed; one row per call.
  const second = await applied(t, tenant, { userId, timestamp: iso(BASE + 1000), traits: { plan: 'pro', email: ' Ada@Example.com ', seats: 3 } });
  rows = await rowsOf(tenant);
  t.is(rows.length, 3);
  t.is(rows[2].kind, SERVICE_EVENTS.profileFieldsChanged);
  t.deepEqual(JSON.parse(rows[2].payload), { userId, profileId, messageId: second, at: BASE + 1000, changed: { plan: 'pro', seats: 3 } });

  // A consent-only call (address from the stored profile) writes only the subscription event.
  const third = await applied(t, tenant, { userId, timestamp: iso(BASE + 2000), traits: {}, consent: [{ channel: 'email', status: 'withdrawn' }] });
  rows = await rowsOf(tenant);
  t.is(rows.length, 4);
  t.is(rows[3].kind, SERVICE_EVENTS.subscriptionChanged);
  t.like(JSON.parse(rows[3].payload), { userId, messageId: third, address: 'ada@example.com', status: 'withdrawn', decidedAt: BASE + 2000 });
});

test.serial('without the attribute-trigger feature a trait change writes no row (no journey could start from it); a consent change still does', async (t) => {
  const tenant = await newTenant(h);
  const userId = 'no-trigger-user';
  await applied(t, tenant, { userId, timestamp: iso(BASE), traits: { plan: 'free', email: 'bo@example.com' } });
  t.deepEqual(await rowsOf(tenant), []);
  await applied(t, tenant, {
    userId,
    timestamp: iso(BASE + 1000),
    traits: { plan: 'pro' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: BASE }],
  });
  t.deepEqual(
    (await rowsOf(tenant)).map((r) => r.kind),
    [SERVICE_EVENTS.subscriptionChanged],
  );
  const profile = await h.db.profile.findUniqueOrThrow({ where: { id: await profileIdOf(tenant, userId) } });
  t.deepEqual(JSON.parse(profile.fields), { plan: 'pro', email: 'bo@example.com' }, 'the changes themselves are applied');
});

test.serial('a duplicate retry, a call changing nothing and a call whose traits are all older write no row', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const userId = 'quiet-user';
  const body = {
    userId,
    messageId: 'quiet-1',
    timestamp: iso(BASE + 10_000),
    traits: { plan: 'pro', email: 'q@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: BASE + 10_000 }],
  };
  await applied(t, tenant, body);
  const before = (await rowsOf(tenant)).length;
  t.is(before, 2);

  // The same call again: a duplicate, nothing applied again.
  await applied(t, tenant, body, true);
  // A duplicate with changed consent: dropped, as the spec says.
  await applied(t, tenant, { ...body, consent: [{ channel: 'email', status: 'withdrawn', consentedAt: BASE + 20_000 }] }, true);
  // Same values again, later: written (times move) but nothing changes.
  await applied(t, tenant, { userId, timestamp: iso(BASE + 30_000), traits: { plan: 'pro', email: 'q@example.com' } });
  // A newer decision with the same status and expiry: nothing changes.
  await applied(t, tenant, {
    userId,
    timestamp: iso(BASE + 30_000),
    traits: {},
    consent: [{ channel: 'email', status: 'granted', consentedAt: BASE + 30_000 }],
  });
  // Every trait older than what is stored, and an older decision for the same address: skipped.
  await applied(t, tenant, {
    userId,
    timestamp: iso(BASE),
    traits: { plan: 'free', email: 'q@example.com' },
    consent: [{ channel: 'email', status: 'withdrawn', consentedAt: BASE }],
  });
  // `unknown` never replaces a decision.
  await applied(t, tenant, { userId, timestamp: iso(BASE + 40_000), traits: {}, consent: [{ channel: 'email', status: 'unknown' }] });

  t.is((await rowsOf(tenant)).length, before, 'no service event for any of them');
  const profile = await request(gateway.url, `/api/profiles/${tenant.slug}/${userId}`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  t.deepEqual(profile.json.fields, { plan: 'pro', email: 'q@example.com' });
  t.is(profile.json.updated_at, BASE + 40_000);
});

test.serial('a running worker relays each row to the service-events queue as job o<id> and marks it relayed; relaying a row again adds no job', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const queue = serviceQueue(t, h.env.QUEUE_PREFIX);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());

  await applied(t, tenant, { userId: 'relayed', timestamp: iso(BASE), traits: { email: 'r@example.com' }, consent: [{ channel: 'email', status: 'granted' }] });
  await applied(t, tenant, { userId: 'relayed', timestamp: iso(BASE + 1000), traits: { plan: 'pro' } });
  t.true(await allRelayed(tenant, 3), 'every row marked relayed');

  const rows = await rowsOf(tenant);
  for (const row of rows) {
    const job = await queue.getJob(`o${row.id}`);
    t.truthy(job, `job o${row.id}`);
    t.is(job!.name, row.kind);
    t.deepEqual(job!.data, {
      outboxId: row.id.toString(),
      environmentId: tenant.environmentId,
      kind: row.kind,
      createdAt: row.createdAt.getTime(),
      payload: row.payload,
    });
  }
  // The service-events worker takes them.
  t.true(
    await eventually(async () => (await Promise.all(rows.map(async (r) => (await queue.getJob(`o${r.id}`))?.getState()))).every((s) => s === 'completed')),
  );
  t.is((await jobsOf(queue, tenant)).length, rows.length);

  // A relay that delivered but did not get to mark the row (crash, timeout): the row is
  // relayed again, and its jobId makes that a no-op in the queue.
  const again = rows[0];
  const firstJob = (await queue.getJob(`o${again.id}`))!;
  await h.db.outboxEvent.update({ where: { id: again.id }, data: { relayedAt: null } });
  const remarked = await eventually(async () => (await h.db.outboxEvent.findUniqueOrThrow({ where: { id: again.id } })).relayedAt, { timeoutMs: 15_000 });
  t.truthy(remarked, 'relayed a second time');
  t.true(remarked! > again.relayedAt!);
  const jobs = await jobsOf(queue, tenant);
  t.is(jobs.length, rows.length, 'still one job per row');
  t.is(jobs.filter((j) => j.data.outboxId === again.id.toString()).length, 1);
  const sameJob = (await queue.getJob(`o${again.id}`))!;
  t.is(sameJob.timestamp, firstJob.timestamp, 'the first job, not a new one');
  t.is(await sameJob.getState(), 'completed');
});

test.serial('a service event written while the worker cannot reach Redis reaches the queue once Redis is back, once', async (t) => {
  const proxy = await startProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  const wh = await openHarness({ DATABASE_URL: OUTBOX_DATABASE_URL, REDIS_URL: proxy.url(TEST_REDIS_URL) });
  t.teardown(() => wh.close());
  const queue = serviceQueue(t, wh.env.QUEUE_PREFIX);
  const tenant = await newTenant(h, 'attribute-trigger');
  const worker = await workerInProcess(wh);
  t.teardown(() => worker.close());

  // The relay works before the cut.
  await applied(t, tenant, { userId: 'cut', timestamp: iso(BASE), traits: { plan: 'free' } });
  t.true(await allRelayed(tenant, 1));

  proxy.cut();
  // The gateway (direct Redis and PostgreSQL) still commits Identify with its service event.
  await applied(t, tenant, { userId: 'cut', timestamp: iso(BASE + 1000), traits: { plan: 'pro' } });
  const [, pending] = await rowsOf(tenant);
  t.truthy(pending);
  // Longer than the relay's 5 s bound on an add, so at least one relay attempt gives up.
  await sleep(6000);
  t.is((await h.db.outboxEvent.findUniqueOrThrow({ where: { id: pending.id } })).relayedAt, null, 'not relayed while Redis is away');
  t.is(await queue.getJob(`o${pending.id}`), undefined);

  proxy.restore();
  const started = Date.now();
  const job = await eventually(() => queue.getJob(`o${pending.id}`), { timeoutMs: 25_000, intervalMs: 200 });
  t.truthy(job, 'the service event reached the queue');
  t.true(await allRelayed(tenant, 2, 25_000), 'and its row is marked relayed');
  t.log(`relayed ${Date.now() - started} ms after Redis came back`);
  t.like(job!.data, { outboxId: pending.id.toString(), kind: SERVICE_EVENTS.profileFieldsChanged, payload: pending.payload });
  // Adds held while Redis was away may land late; still one job per row.
  await sleep(1000);
  t.is((await jobsOf(queue, tenant)).length, 2);
});
