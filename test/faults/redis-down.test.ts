// A gateway whose Redis goes away: Track must answer 503 promptly (never 202, never hang),
// recover by itself, and lose nothing it accepted.
import test, { type ExecutionContext } from 'ava';
import { queuedMessageIds } from '../helpers/batches.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { startProxy, startFreezableProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_REDIS_URL, type Harness, type Tenant } from '../helpers/services.ts';

const UNAVAILABLE = { error: 'Event storage is unavailable' };
const ENQUEUE_TIMEOUT_MS = 500;

interface Faultable {
  port: number;
  url(base: string): string;
  restore(): void;
  close(): Promise<void>;
}

/**
 * Gateway whose Redis traffic goes through `proxy`; `direct` shares its queue but reaches
 * Redis directly (for the worker and for looking into the queue).
 */
async function pipeline(t: ExecutionContext, proxy: Faultable) {
  t.teardown(() => proxy.close());
  const gh = await openHarness({ REDIS_URL: proxy.url(TEST_REDIS_URL), ENQUEUE_TIMEOUT_MS: String(ENQUEUE_TIMEOUT_MS) });
  t.teardown(() => gh.close());
  const direct = await openHarness({ QUEUE_PREFIX: gh.env.QUEUE_PREFIX });
  t.teardown(() => direct.close());
  const tenant = await newTenant(direct);
  const gateway = await gatewayInProcess(gh);
  t.teardown(() => gateway.close());
  const send = async (body: Record<string, unknown>) => {
    const started = performance.now();
    const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body, timeoutMs: 10_000 });
    return { ...reply, ms: performance.now() - started };
  };
  return { direct, tenant, send };
}

type Sent = Reply & { ms: number };

/** Sends `count` events (half one after another, half at once); each must be a prompt 503. */
async function expectRefused(t: ExecutionContext, send: (b: Record<string, unknown>) => Promise<Sent>, count: number, boundMs: number) {
  const bodies = Array.from({ length: count }, (_, i) => trackBody({ event: 'Refused', properties: { i } }));
  const half = Math.floor(count / 2);
  const replies: Sent[] = [];
  for (const b of bodies.slice(0, half)) replies.push(await send(b));
  replies.push(...(await Promise.all(bodies.slice(half).map(send))));
  for (const r of replies) {
    t.is(r.status, 503, r.text);
    t.deepEqual(r.json, UNAVAILABLE);
    t.true(r.ms < boundMs, `answered in ${Math.round(r.ms)} ms, bound ${boundMs} ms`);
  }
  t.log(`${count} refused, slowest in ${Math.round(Math.max(...replies.map((r) => r.ms)))} ms`);
  return bodies;
}

/** Polls Track with fresh events until one is accepted; returns the accepted probes. */
async function recovers(t: ExecutionContext, send: (b: Record<string, unknown>) => Promise<Sent>, withinMs: number) {
  const started = Date.now();
  const accepted: string[] = [];
  const ok = await eventually(
    async () => {
      const body = trackBody({ event: 'Probe' });
      const reply = await send(body);
      t.not(reply.status, 500, reply.text);
      if (reply.status === 202) accepted.push(body.messageId as string);
      return reply.status === 202;
    },
    { timeoutMs: withinMs, intervalMs: 200 },
  );
  t.true(ok, `Track accepted again within ${withinMs} ms`);
  t.log(`Track answered 202 again ${Date.now() - started} ms after Redis came back`);
  return accepted;
}

async function acceptAll(t: ExecutionContext, send: (b: Record<string, unknown>) => Promise<Sent>, count: number) {
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const body = trackBody({ event: 'Before', properties: { i } });
    const reply = await send(body);
    t.is(reply.status, 202, reply.text);
    ids.push(body.messageId as string);
  }
  return ids;
}

/** Every messageId has exactly one row, processed; and the tenant has `total` rows. */
async function storedOnce(t: ExecutionContext, h: Harness, tenant: Tenant, ids: string[], total: number) {
  const all = await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) >= total, { timeoutMs: 30_000 });
  t.true(all, `${total} events stored`);
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId } });
  t.is(rows.length, total);
  const byId = new Map<string, number>();
  for (const r of rows) byId.set(r.messageId, (byId.get(r.messageId) ?? 0) + 1);
  for (const id of ids) t.is(byId.get(id), 1, `one row for ${id}`);
  t.true(rows.every((r) => r.status === 'processed'));
}

/** Refused events sent again until accepted (the client's retry with the same body). */
async function resend(t: ExecutionContext, send: (b: Record<string, unknown>) => Promise<Sent>, bodies: Record<string, unknown>[]) {
  for (const b of bodies) {
    const reply = await send(b);
    t.is(reply.status, 202, reply.text);
    t.deepEqual(reply.json, { message_id: b.messageId, status: 'accepted' });
  }
}

test('Redis cut: 503 at once, 202 again by itself after it returns, nothing lost or doubled', async (t) => {
  const proxy = await startProxy(TEST_REDIS_URL);
  const { direct, tenant, send } = await pipeline(t, proxy);

  const before = await acceptAll(t, send, 10);

  proxy.cut();
  const refused = await expectRefused(t, send, 6, 3000);
  // Still prompt after a while of reconnect attempts.
  await sleep(2500);
  refused.push(...(await expectRefused(t, send, 4, 3000)));

  // Nothing of a refused event was recorded.
  const queued = await queuedMessageIds(direct.operator.eventsQueue(), tenant.environmentId);
  t.is(queued.size, before.length, 'the accepted events are queued');
  for (const b of refused) t.false(queued.has(b.messageId as string));

  proxy.restore();
  const probes = await recovers(t, send, 10_000);

  const worker = await workerInProcess(direct);
  t.teardown(() => worker.close());
  await storedOnce(t, direct, tenant, [...before, ...probes], before.length + probes.length);
  for (const b of refused) t.is(await direct.db.event.count({ where: { environmentId: tenant.environmentId, messageId: b.messageId as string } }), 0);

  await resend(t, send, refused);
  const ids = [...before, ...probes, ...refused.map((b) => b.messageId as string)];
  await storedOnce(t, direct, tenant, ids, ids.length);
});

test('Redis hangs (new connections stall): 503 within the enqueue bound, then 202 again', async (t) => {
  const proxy = await startProxy(TEST_REDIS_URL);
  const { direct, tenant, send } = await pipeline(t, proxy);

  const before = await acceptAll(t, send, 10);

  proxy.stall();
  const refused = await expectRefused(t, send, 6, ENQUEUE_TIMEOUT_MS + 1500);
  await sleep(2000);
  refused.push(...(await expectRefused(t, send, 4, ENQUEUE_TIMEOUT_MS + 1500)));

  proxy.restore();
  const probes = await recovers(t, send, 10_000);

  const worker = await workerInProcess(direct);
  t.teardown(() => worker.close());
  await resend(t, send, refused);
  const ids = [...before, ...probes, ...refused.map((b) => b.messageId as string)];
  await storedOnce(t, direct, tenant, ids, ids.length);
});

test('Redis stops answering on open connections: 503 within the enqueue bound; a late-landing refused event is still one event', async (t) => {
  const proxy = await startFreezableProxy(TEST_REDIS_URL);
  const { direct, tenant, send } = await pipeline(t, proxy);

  const before = await acceptAll(t, send, 10);

  proxy.freeze();
  const refused = await expectRefused(t, send, 6, ENQUEUE_TIMEOUT_MS + 1500);

  proxy.restore();
  const probes = await recovers(t, send, 10_000);

  const worker = await workerInProcess(direct);
  t.teardown(() => worker.close());
  // The refused adds were held, not lost: they may land once Redis answers. The caller's
  // retry with the same messageId must then be a duplicate, not a second event.
  const queued = await queuedMessageIds(direct.operator.eventsQueue(), tenant.environmentId);
  t.log(`${refused.filter((b) => queued.has(b.messageId as string)).length} of ${refused.length} refused events landed in Redis after it answered again`);
  await resend(t, send, refused);
  const ids = [...before, ...probes, ...refused.map((b) => b.messageId as string)];
  await storedOnce(t, direct, tenant, ids, ids.length);
});
