// Fairness between tenants (gateway/admission.ts, gateway/upload-watch.ts): an environment that
// fills its part, or its fair share of what is free, of the uploads or of the requests in flight
// gets 429 with Retry-After while another environment is served; an environment holding fewer
// uploads takes one back from the environment holding the most; the process's totals still
// bound everyone; a body that
// arrives too slowly is cut with 408 and a closed connection at BODY_TIMEOUT_MS, and its slot
// freed. Small bounds on in-process gateways; the 1,000-upload lockout at the defaults is
// test/faults/tenant-lockout.test.ts.
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import test, { type ExecutionContext } from 'ava';
import { REFUSAL_REASONS, type RefusalReason } from '../../gateway/admission.ts';
import { METRIC_NAMES } from '../../gateway/metrics/gateway-metrics.ts';
import { queuedMessageIds } from '../helpers/batches.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, TEST_DATABASE_URL, type Harness, type Tenant } from '../helpers/services.ts';
import { holdUpload, type HeldUpload } from '../helpers/uploads.ts';

async function gatewayWith(t: ExecutionContext, env: Record<string, string>): Promise<{ h: Harness; gateway: InProcessGateway }> {
  const h = await openHarness(env);
  t.teardown(() => h.close());
  const gateway = await gatewayInProcess(h, { ownPool: true });
  t.teardown(() => gateway.close());
  return { h, gateway };
}

const metricsOf = async (gateway: InProcessGateway) => samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
const refusals = async (gateway: InProcessGateway) => {
  const m = await metricsOf(gateway);
  return Object.fromEntries(REFUSAL_REASONS.map((reason) => [reason, m.get(series(METRIC_NAMES.refusals, { reason }))])) as Record<RefusalReason, number>;
};
const gauge = async (gateway: InProcessGateway, name: string) => (await metricsOf(gateway)).get(name);

/** A Track upload of `tenant` with its headers and the first byte of its body sent; `finish` sends the rest. */
function heldTrack(gateway: InProcessGateway, tenant: Tenant, extra: Record<string, string> = {}) {
  const body = trackBody();
  const bytes = Buffer.from(JSON.stringify(body));
  const upload = holdUpload(
    gateway.url,
    `/api/track/${tenant.slug}`,
    { 'X-Api-Key': tenant.key, 'Content-Type': 'application/json', 'Content-Length': bytes.length, ...extra },
    bytes.subarray(0, 1),
  );
  return { ...upload, messageId: body.messageId as string, finish: () => upload.send(bytes.subarray(1)) };
}

function refusedUnread(t: ExecutionContext, answer: Awaited<HeldUpload['answer']>, what: string) {
  t.is(answer?.status, 429, what);
  t.is(answer?.body, '{"error":"Too many requests"}', what);
  t.is(answer?.headers['retry-after'], '1', what);
  // Its body was never read: the connection cannot carry another request.
  t.is(answer?.headers.connection, 'close', what);
}

test('uploads: beyond its part or its fair share an environment gets 429 before its body is read; one holding fewer takes an upload back; the total binds all', async (t) => {
  const { h, gateway } = await gatewayWith(t, { MAX_UPLOADS_PER_ENVIRONMENT: '2', MAX_UPLOADS: '4', BODY_TIMEOUT_MS: '60000' });
  const [a, b, c, d, e] = [await newTenant(h), await newTenant(h), await newTenant(h), await newTenant(h), await newTenant(h)];
  // Keys looked up once, so the held uploads wait on nothing but their bodies.
  for (const tenant of [a, b, c, d, e])
    t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() })).status, 202);
  const reading = (n: number) => eventually(async () => (await gauge(gateway, METRIC_NAMES.uploads)) === n, { intervalMs: 20 });

  const bHeld = [heldTrack(gateway, b), heldTrack(gateway, b)];
  t.true(await reading(2), "B's two uploads are being read");
  const bExcess = heldTrack(gateway, b);
  refusedUnread(t, await bExcess.answer, "B's third upload, past its part");
  t.true((await bExcess.closed) < 10_000, 'closed by the gateway');

  // A is read meanwhile, its body arriving in two parts like B's; but with 2 of 4 free a second
  // upload of A would leave it holding as many as are free: refused.
  const aHeld = heldTrack(gateway, a);
  t.true(await reading(3));
  refusedUnread(t, await heldTrack(gateway, a).answer, "A's second upload, past its fair share");
  // C, holding none, takes the last slot.
  const cHeld = heldTrack(gateway, c);
  t.true(await reading(4), 'the total is full');
  // D holds none and B two: one of B's uploads is taken back (429, its body unread) and read for D.
  const dHeld = heldTrack(gateway, d);
  const bTaken = await Promise.race(bHeld.map((u) => u.answer.then(() => u)));
  refusedUnread(t, await bTaken.answer, "B's upload taken back for D");
  t.true((await bTaken.closed) < 10_000, 'closed by the gateway');
  const [bKept] = bHeld.filter((u) => u !== bTaken);
  t.is(await Promise.race([bKept.answer.then(() => 'answered'), sleep(200).then(() => 'still read')]), 'still read', "B's other upload is still read");
  t.is(await gauge(gateway, METRIC_NAMES.uploads), 4);
  // Now no environment holds two more than E: the process's total (4) refuses E.
  refusedUnread(t, await heldTrack(gateway, e).answer, "E's upload with the total full");
  t.like(await refusals(gateway), { uploads_environment: 3, uploads: 1, in_flight: 0, in_flight_environment: 0 });
  // A request without a body takes no upload slot.
  t.is((await request(gateway.url, `/api/profiles/${e.slug}/nobody`, { method: 'GET', headers: { 'x-api-key': e.key } })).status, 404);

  const read = [aHeld, bKept, cHeld, dHeld];
  for (const upload of read) upload.finish();
  for (const upload of read) t.is((await upload.answer)?.status, 202);
  t.is(await gauge(gateway, METRIC_NAMES.uploads), 0);
  // Nothing acknowledged is lost: every 202 is queued, and what was refused is not.
  for (const [tenant, uploads] of [
    [a, [aHeld]],
    [b, [bKept]],
    [c, [cHeld]],
    [d, [dHeld]],
  ] as const) {
    const queued = await queuedMessageIds(h.operator.eventsQueue(), tenant.environmentId);
    for (const upload of uploads) t.true(queued.has(upload.messageId));
  }
  const queuedB = await queuedMessageIds(h.operator.eventsQueue(), b.environmentId);
  t.false(queuedB.has(bExcess.messageId));
  t.false(queuedB.has(bTaken.messageId));
  // And B, its slots free again, is read as before.
  const again = heldTrack(gateway, b);
  again.finish();
  t.is((await again.answer)?.status, 202);
});

test('a stalled body is cut with 408 JSON and a closed connection at BODY_TIMEOUT_MS; a body arriving at the minimum rate is read', async (t) => {
  const { h, gateway } = await gatewayWith(t, { BODY_TIMEOUT_MS: '1000', BODY_MIN_BYTES_PER_SECOND: '1000' });
  const tenant = await newTenant(h);
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() })).status, 202);

  const stalled = heldTrack(gateway, tenant);
  // The same for a compressed body (read through co-body): its compressed bytes are what must arrive.
  const gzipped = gzipSync(Buffer.from(JSON.stringify(trackBody())));
  const stalledGzip = holdUpload(
    gateway.url,
    `/api/track/${tenant.slug}`,
    { 'X-Api-Key': tenant.key, 'Content-Encoding': 'gzip', 'Content-Length': gzipped.length },
    gzipped.subarray(0, 1),
  );
  // 2,000 bytes at 1,250 bytes/s: longer than the grace, faster than the minimum rate.
  const pad = trackBody({ properties: { pad: 'x'.repeat(2000) } });
  const steadyBytes = Buffer.from(JSON.stringify(pad));
  const steady = holdUpload(
    gateway.url,
    `/api/track/${tenant.slug}`,
    { 'X-Api-Key': tenant.key, 'Content-Length': steadyBytes.length },
    steadyBytes.subarray(0, 250),
  );
  let sent = 250;
  const trickle = setInterval(() => {
    steady.send(steadyBytes.subarray(sent, sent + 250));
    sent += 250;
    if (sent >= steadyBytes.length) clearInterval(trickle);
  }, 200);
  t.teardown(() => clearInterval(trickle));

  for (const [what, upload] of [
    ['plain', stalled],
    ['gzip', stalledGzip],
  ] as const) {
    const answer = await upload.answer;
    t.is(answer?.status, 408, what);
    t.is(answer?.body, '{"error":"Request timeout"}', what);
    t.regex(answer?.headers['content-type'] ?? '', /^application\/json/, what);
    t.is(answer?.headers.connection, 'close', what);
    // The grace is 1 s from when the gateway began reading; checks run every 250 ms. The upper
    // margin is for a loaded machine.
    t.true(answer!.ms >= 950 && answer!.ms < 5000, `${what}: cut after ${Math.round(answer!.ms)} ms`);
    t.true((await upload.closed) < 10_000, `${what}: closed`);
  }
  const steadyAnswer = await steady.answer;
  t.is(steadyAnswer?.status, 202, steadyAnswer?.body);
  t.true(steadyAnswer!.ms > 1000, `the steady body took ${Math.round(steadyAnswer!.ms)} ms, longer than the grace`);

  const m = await metricsOf(gateway);
  t.is(m.get(METRIC_NAMES.uploadsCut), 2);
  t.is(m.get(METRIC_NAMES.uploads), 0, 'the slots of the cut uploads are free');
  t.is(m.get(series(METRIC_NAMES.requests, { route: 'track', status: 408 })), 2);
  t.false((await queuedMessageIds(h.operator.eventsQueue(), tenant.environmentId)).has(stalled.messageId));
});

test('in flight: one environment whose calls are held (a locked profile) gets 429 beyond its part; another environment is served', async (t) => {
  const { h, gateway } = await gatewayWith(t, { MAX_IN_FLIGHT_PER_ENVIRONMENT: '4', MAX_IN_FLIGHT: '12', DATABASE_POOL_SIZE: '8' });
  const [a, b] = [await newTenant(h), await newTenant(h)];
  const identify = (tenant: Tenant, userId: string, traits: Record<string, unknown>) =>
    request(gateway.url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: { userId, traits }, timeoutMs: 60_000 });
  t.is((await identify(a, 'a-user', { n: 0 })).status, 200);
  t.is((await identify(b, 'b-user', { n: 0 })).status, 200);

  // A transaction of the test's own holds B's profile row, as a long write would.
  const locker = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await locker.connect();
  t.teardown(() => locker.end().catch(() => {}));
  await locker.query('BEGIN');
  const locked = await locker.query('SELECT p.id FROM profiles p JOIN profile_users u ON u.profile_id = p.id WHERE u.environment_id = $1 FOR UPDATE OF p', [
    b.environmentId,
  ]);
  t.is(locked.rowCount, 1);
  let released = false;
  t.teardown(() => (released ? undefined : locker.query('ROLLBACK').catch(() => {})));

  // Four of B's calls wait on the lock, holding B's part; six more are refused at once.
  const held = Array.from({ length: 4 }, (_, i) => identify(b, 'b-user', { n: i + 1 }));
  t.true(await eventually(async () => (await gauge(gateway, METRIC_NAMES.inFlight)) === 4, { intervalMs: 20 }), "B's part is full");
  const excess = await Promise.all(Array.from({ length: 6 }, () => identify(b, 'b-user', { n: 99 })));
  for (const reply of excess) {
    t.is(reply.status, 429);
    t.deepEqual(reply.json, { error: 'Too many requests' });
    t.is(reply.headers.get('retry-after'), '1');
  }
  t.is((await request(gateway.url, `/api/profiles/${b.slug}/b-user`, { method: 'GET', headers: { 'x-api-key': b.key } })).status, 429, "B's Profiles too");

  // A meanwhile: Track, Profiles and Identify, three at a time, none refused.
  for (let round = 0; round < 10; round++) {
    const replies = await Promise.all([
      request(gateway.url, `/api/track/${a.slug}`, { headers: { 'x-api-key': a.key }, body: trackBody() }),
      request(gateway.url, `/api/profiles/${a.slug}/a-user`, { method: 'GET', headers: { 'x-api-key': a.key } }),
      identify(a, 'a-user', { n: round + 1 }),
    ]);
    t.deepEqual(
      replies.map((r) => r.status),
      [202, 200, 200],
      `round ${round}`,
    );
  }
  t.like(await refusals(gateway), { in_flight_environment: 7, in_flight: 0, uploads: 0, uploads_environment: 0 });

  // The lock goes: B's held calls are applied and answered, and B is served again.
  await locker.query('COMMIT');
  released = true;
  for (const reply of await Promise.all(held)) t.is(reply.status, 200, reply.text);
  const profile = await request(gateway.url, `/api/profiles/${b.slug}/b-user`, { method: 'GET', headers: { 'x-api-key': b.key } });
  t.is(profile.status, 200);
  // Each held call was applied (the last one in arrival order wins the trait).
  t.true([1, 2, 3, 4].includes(profile.json.fields.n), JSON.stringify(profile.json.fields));
  t.is(await gauge(gateway, METRIC_NAMES.inFlight), 0);
});
