// Delivery through the real pipeline: gateway over HTTP → BullMQ in Redis → worker →
// PostgreSQL. One event per environment and messageId whatever happens on the way.
import test, { type ExecutionContext } from 'ava';
import { eventsGet, eventsNames } from '../../cli/commands/events.ts';
import { OperatorError } from '../../operations/operator.ts';
import { jobIdFor } from '../../platform/queues.ts';
import { eventBatchName, type QueuedEvent } from '../../events/jobs.ts';
import { batchCompleted, queuedMessageIds } from '../helpers/batches.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { capturedLogger, gatewayInProcess, harnessWithGatewayAndWorker, spawnTwoGateways, workerInProcess, type Child } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL, type Harness, type Tenant } from '../helpers/services.ts';

// The file's shared pipeline: one gateway and one worker on the harness's own queue.
let h: Harness;
let gateway: { url: string; close(): Promise<void> };
let worker: { close(): Promise<void> };

harnessWithGatewayAndWorker(test, (...opened) => {
  [h, gateway, worker] = opened;
});

const send = (url: string, tenant: Tenant, body: Record<string, unknown>) =>
  request(url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });

/**
 * A gateway on a harness opened with `env`, and the worker's side: a harness on the same queue
 * whose PostgreSQL is reached through a proxy the test cuts or stalls. Each closes when the test
 * ends; the test starts its worker on `wh`.
 */
async function workerThroughProxy(t: ExecutionContext, env: Record<string, string>) {
  const proxy = await startProxy(TEST_DATABASE_URL);
  t.teardown(() => proxy.close());
  const gh = await openHarness(env);
  t.teardown(() => gh.close());
  const wh = await openHarness({ QUEUE_PREFIX: gh.env.QUEUE_PREFIX, DATABASE_URL: proxy.url(TEST_DATABASE_URL) });
  t.teardown(() => wh.close());
  const tenant = await newTenant(gh);
  const gw = await gatewayInProcess(gh);
  t.teardown(() => gw.close());
  return { proxy, gh, wh, tenant, gw };
}

const rowsOf = (hh: Harness, tenant: Tenant) => hh.db.event.count({ where: { environmentId: tenant.environmentId } });

/** Until the queue has nothing left to run (every job completed or failed). */
async function drained(hh: Harness): Promise<boolean> {
  return eventually(
    async () => {
      const c = await hh.operator.eventsQueue().getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused');
      return Object.values(c).every((n) => n === 0);
    },
    { timeoutMs: 30_000 },
  );
}

test('a duplicate sent twice to one gateway: two 202, one row', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({ properties: { n: 1 } });

  const first = await send(gateway.url, tenant, body);
  const second = await send(gateway.url, tenant, body);
  t.is(first.status, 202, first.text);
  t.is(second.status, 202, second.text);
  t.deepEqual(second.json, { message_id: body.messageId, status: 'accepted' });

  t.is(await eventually(() => rowsOf(h, tenant)), 1);
  t.true(await drained(h));
  t.is(await rowsOf(h, tenant), 1);

  // A repeat long after (its batch completed, so it left Redis) and with another body still
  // counts once: the first event stays as stored.
  const queue = h.operator.eventsQueue();
  t.is((await queuedMessageIds(queue, tenant.environmentId)).size, 0, 'completed batches keep nothing in Redis');
  const late = await send(gateway.url, tenant, { ...body, event: 'Changed Name', properties: { n: 2 } });
  t.is(late.status, 202, late.text);
  t.true(await drained(h), 'the late repeat went through the worker');
  t.is((await queuedMessageIds(queue, tenant.environmentId)).size, 0, 'and its batch completed');
  t.is(await rowsOf(h, tenant), 1);
  const row = await h.db.event.findFirstOrThrow({ where: { environmentId: tenant.environmentId } });
  t.is(row.event, 'Signed Up');
  t.is(JSON.parse(row.payload).properties.n, 1);
});

test('the same event sent at the same moment to two gateway processes is stored once', async (t) => {
  const tenant = await newTenant(h);
  const children: Child[] = [];
  t.teardown(async () => {
    await Promise.all(children.map((c) => c.kill('SIGKILL')));
  });
  const [g1, g2] = await spawnTwoGateways(h.env, children);
  t.not(g1.url, g2.url);

  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const body = trackBody({ messageId: `race-${i}-${Date.now()}`, properties: { i } });
    ids.push(body.messageId as string);
    const replies = await Promise.all([send(g1.url, tenant, body), send(g2.url, tenant, body)]);
    for (const r of replies) {
      t.is(r.status, 202, r.text);
      t.deepEqual(r.json, { message_id: body.messageId, status: 'accepted' });
    }
  }

  t.is(await eventually(async () => (await rowsOf(h, tenant)) === 20 && 20, { timeoutMs: 30_000 }), 20);
  t.true(await drained(h));
  const perId = await h.db.event.groupBy({ by: ['messageId'], where: { environmentId: tenant.environmentId }, _count: { _all: true } });
  t.deepEqual(perId.map((r) => r.messageId).sort(), [...ids].sort());
  t.true(perId.every((r) => r._count._all === 1));
  const failed = await h.db.event.count({ where: { environmentId: tenant.environmentId, status: { not: 'processed' } } });
  t.is(failed, 0);
});

test('events get shows pending while no worker runs, then the event; events names counts names', async (t) => {
  // Its own queue, on which no worker runs until the test starts one.
  const hq = await openHarness();
  t.teardown(() => hq.close());
  const tenant = await newTenant(hq);
  const gw = await gatewayInProcess(hq);
  t.teardown(() => gw.close());

  const body = trackBody({ event: 'Order Completed', properties: { total: 42 } });
  const messageId = body.messageId as string;
  t.is((await send(gw.url, tenant, body)).status, 202);
  for (const event of ['Order Completed', 'Signed Up']) t.is((await send(gw.url, tenant, trackBody({ event }))).status, 202);

  const pending = await eventsGet(hq.operator, [tenant.slug, messageId]);
  t.is(pending.status, 'pending');
  t.like(pending, { withinLimits: true, limitReason: null, drivesJourneys: true }, 'whether it may drive journeys, before it is stored');
  t.is(pending.messageId, messageId);
  t.is(typeof pending.receivedAt, 'number');
  t.like(pending.event, { messageId, event: 'Order Completed', properties: { total: 42 } });
  t.deepEqual(await eventsNames(hq.operator, [tenant.slug]), []);
  await t.throwsAsync(eventsGet(hq.operator, [tenant.slug, 'never-sent']), { instanceOf: OperatorError });

  const w = await workerInProcess(hq);
  t.teardown(() => w.close());

  const processed = await eventually(async () => {
    const got = await eventsGet(hq.operator, [tenant.slug, messageId]);
    return got.status === 'processed' ? got : null;
  });
  t.truthy(processed, 'the event is stored once a worker ran');
  t.like(processed, { messageId, status: 'processed', withinLimits: true, drivesJourneys: true, limitReason: null, error: null });
  t.deepEqual(processed!.event, {
    type: 'track',
    messageId,
    event: 'Order Completed',
    userId: 'user-1',
    anonymousId: null,
    timestamp: '2024-05-01T10:00:00Z',
    properties: { total: 42 },
    context: {},
    integrations: {},
  });

  t.is(await eventually(() => rowsOf(hq, tenant).then((n) => n === 3)), true);
  const names = await eventsNames(hq.operator, [tenant.slug]);
  t.deepEqual(
    names.map(({ event, count }) => ({ event, count })),
    [
      { event: 'Order Completed', count: 2 },
      { event: 'Signed Up', count: 1 },
    ],
  );
  t.true(names.every((n) => typeof n.lastSeenAt === 'number' && Math.abs(Date.now() - n.lastSeenAt) < 60_000));
});

/** An event as the gateway would enqueue it, except that its payload is not JSON. */
function malformed(tenant: Tenant, messageId: string): QueuedEvent {
  return {
    environmentId: tenant.environmentId,
    messageId,
    receivedAt: Date.now(),
    timestampMs: Date.parse('2024-05-01T10:00:00Z'),
    payload: '{"type":"track","messageId":',
  };
}

/** A well-formed event, as the gateway would enqueue it. */
function wellFormed(tenant: Tenant, messageId: string): QueuedEvent {
  const body = trackBody({ messageId });
  return { ...malformed(tenant, messageId), payload: JSON.stringify({ ...body, anonymousId: null, properties: {}, context: {}, integrations: {} }) };
}

test('an event that can never be stored fails alone at once: its batch completes, it waits failed in the dead-letter queue', async (t) => {
  const tenant = await newTenant(h);
  const bad = `bad-${Date.now()}`;
  const good = `good-${Date.now()}`;
  const batch = await h.operator.eventsQueue().add(eventBatchName(2), { events: [malformed(tenant, bad), wellFormed(tenant, good)] });

  const jobId = jobIdFor(tenant.environmentId, bad);
  const state = await eventually(async () => {
    const s = await (await h.operator.deadLetterQueue().getJob(jobId))?.getState();
    return s === 'failed' ? s : null;
  });
  t.is(state, 'failed');
  t.true(await batchCompleted(h.operator.eventsQueue(), batch.id!), 'the batch completed for the rest');
  // Kept (removeOnFail: false) and not retried on its own.
  await sleep(500);
  const job = await h.operator.deadLetterQueue().getJob(jobId);
  t.is(await job!.getState(), 'failed');
  t.is(job!.failedReason, 'payload is not JSON');
  t.is(job!.attemptsMade, 1);
  t.is(job!.data.event.messageId, bad);
  // The good event was stored; nothing could be stored for the bad one (its payload cannot be read).
  t.is(await rowsOf(h, tenant), 1);
  t.like(await eventsGet(h.operator, [tenant.slug, good]), { status: 'processed' });
  t.like(await eventsGet(h.operator, [tenant.slug, bad]), { messageId: bad, status: 'failed', error: 'payload is not JSON' });
});

test('a job whose attempts run out while PostgreSQL is away ends failed and events get shows it', async (t) => {
  // Gateway side: few, fast attempts.
  const { proxy, gh, wh, tenant, gw } = await workerThroughProxy(t, { JOB_ATTEMPTS: '3', JOB_BACKOFF_MS: '50' });

  proxy.cut();
  const { log, records } = capturedLogger();
  const w = await workerInProcess(wh, log);
  t.teardown(() => w.close());
  const body = trackBody();
  t.is((await send(gw.url, tenant, body)).status, 202);

  const failedBatch = await eventually(async () => (await gh.operator.eventsQueue().getJobs(['failed'], 0, 0))[0] ?? null);
  t.truthy(failedBatch, 'the batch failed for good');
  t.is(failedBatch!.attemptsMade, 3);
  t.deepEqual(
    failedBatch!.data.events.map((e) => e.messageId),
    [body.messageId],
  );
  const jobId = jobIdFor(tenant.environmentId, body.messageId as string);
  const parked = await eventually(async () => (await (await gh.operator.deadLetterQueue().getJob(jobId))?.getState()) === 'failed');
  t.true(parked, 'its event waits in the dead-letter queue');
  // The log names the event: a debug line per failed attempt, then an error line for good.
  const about = records.filter((r) => r.messageId === body.messageId);
  t.is(about.filter((r) => r.level === 20 && r.msg === 'event in a failed batch; retrying').length, 2);
  t.like(
    about.find((r) => r.level === 50),
    { jobId: failedBatch!.id, environmentId: tenant.environmentId },
  );
  t.regex(about.find((r) => r.level === 50)!.msg as string, /^event failed for good/);

  // The `failed` row could not be written either (PostgreSQL is still away): Redis tells.
  const got = await eventsGet(gh.operator, [tenant.slug, body.messageId as string]);
  t.like(got, { messageId: body.messageId, status: 'failed' });
  t.is(typeof (got as { error?: unknown }).error, 'string');
  t.like(got.event, { messageId: body.messageId, event: 'Signed Up' });
  t.is(await rowsOf(gh, tenant), 0);
});

test('a job failing its last attempt is stored with status failed; events get shows the stored event', async (t) => {
  const { proxy, gh, wh, tenant, gw } = await workerThroughProxy(t, { JOB_ATTEMPTS: '1' });
  const w = await workerInProcess(wh);
  t.teardown(() => w.close());

  // PostgreSQL hangs during the only attempt; it is back (the hung connection dropped, which
  // fails the attempt) by the time the worker records the failure.
  proxy.stall();
  const body = trackBody({ event: 'Doomed', properties: { x: 1 } });
  const messageId = body.messageId as string;
  t.is((await send(gw.url, tenant, body)).status, 202);
  const active = await eventually(async () => (await gh.operator.eventsQueue().getJobCounts('active')).active === 1, { intervalMs: 20 });
  t.true(active, 'the attempt started while PostgreSQL hung');
  // Its INSERT must be on the stalled connection before PostgreSQL comes back: an attempt still
  // gathering its batch when the proxy is restored would simply succeed (seen on a loaded machine).
  await sleep(1000);
  proxy.restore();

  const row = await eventually(() => gh.db.event.findFirst({ where: { environmentId: tenant.environmentId } }));
  t.truthy(row, 'the failure was recorded');
  t.is(row!.status, 'failed');
  t.is(typeof row!.error, 'string');
  t.true(row!.error!.length > 0);

  const got = await eventsGet(gh.operator, [tenant.slug, messageId]);
  t.like(got, { messageId, status: 'failed', error: row!.error });
  t.like(got.event, { messageId, event: 'Doomed', properties: { x: 1 } });
  t.is((await gh.operator.eventsQueue().getJobCounts('failed')).failed, 1, 'the batch job is kept');
  const parked = await eventually(
    async () => (await (await gh.operator.deadLetterQueue().getJob(jobIdFor(tenant.environmentId, messageId)))?.getState()) === 'failed',
  );
  t.true(parked, 'and its event waits in the dead-letter queue, not retried on its own');
  t.is((await gh.db.event.findFirstOrThrow({ where: { environmentId: tenant.environmentId } })).status, 'failed');
  t.is(await rowsOf(gh, tenant), 1);
});

test('PostgreSQL away: events accepted meanwhile are retried with backoff and stored after it returns', async (t) => {
  const { proxy, gh, wh, tenant, gw } = await workerThroughProxy(t, { JOB_ATTEMPTS: '10', JOB_BACKOFF_MS: '200' });
  const w = await workerInProcess(wh);
  t.teardown(() => w.close());

  proxy.cut();
  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const body = trackBody({ properties: { i } });
    ids.push(body.messageId as string);
    const reply = await send(gw.url, tenant, body);
    t.is(reply.status, 202, reply.text);
  }

  // The worker tries, fails and backs off; nothing is stored and nothing given up on.
  const queue = gh.operator.eventsQueue();
  const retried = await eventually(
    async () => {
      const jobs = await queue.getJobs(['wait', 'active', 'delayed'], 0, -1);
      const attempted = new Set(jobs.filter((j) => j.attemptsMade >= 2).flatMap((j) => j.data.events.map((e) => e.messageId)));
      return ids.every((id) => attempted.has(id));
    },
    { timeoutMs: 15_000 },
  );
  t.true(retried, "every event's batch was attempted at least twice while PostgreSQL was away");
  const batches = (await queue.getJobs(['wait', 'active', 'delayed'], 0, -1)).filter((j) =>
    j.data.events.some((e) => e.environmentId === tenant.environmentId),
  );
  t.is(batches.length, 10, 'ten requests one after another: ten batch jobs');
  t.is(await rowsOf(gh, tenant), 0);
  t.is((await queue.getJobCounts('failed')).failed, 0);

  proxy.restore();
  t.is(await eventually(async () => (await rowsOf(gh, tenant)) === 10 && 10, { timeoutMs: 30_000 }), 10);
  t.true(await drained(gh));
  const rows = await gh.db.event.findMany({ where: { environmentId: tenant.environmentId } });
  t.deepEqual(rows.map((r) => r.messageId).sort(), [...ids].sort());
  t.true(rows.every((r) => r.status === 'processed' && r.error === null));
  const counts = await queue.getJobCounts('completed', 'failed');
  t.deepEqual(counts, { completed: 0, failed: 0 }, 'every batch completed and left Redis');
});
