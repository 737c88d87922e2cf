// The events processor called directly (a plain function against the real PostgreSQL),
// plus one end-to-end run over HTTP for input only the gateway's serializer can write.
import test from 'ava';
import { storedTrackPayload } from '../../events/track-payload.ts';
import type { QueuedEvent } from '../../events/jobs.ts';
import { eventNames, findEvent } from '../../events/event-store.ts';
import { checkTrack } from '../../events/track.ts';
import { persistEvent } from '../../workers/persist-event.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;

test.before(async () => {
  h = await openHarness();
});

test.after.always(async () => {
  await h?.close();
});

/** A job exactly as the gateway builds it (gateway/handlers/track.ts) from a valid body. */
function jobFor(tenant: Tenant, body: Record<string, unknown>): QueuedEvent {
  const checked = checkTrack(body);
  if (!checked.ok) throw new Error(`invalid test body: ${checked.message}`);
  return {
    environmentId: tenant.environmentId,
    messageId: checked.event.messageId,
    receivedAt: Date.now(),
    timestampMs: checked.timestampMs,
    payload: storedTrackPayload(body),
  };
}

/** Properties nested `levels` deep; the properties object itself is level 1. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = {};
  for (let i = 1; i < levels; i++) value = { a: value };
  return value;
}

const rowsOf = (tenant: Tenant) => h.db.event.count({ where: { environmentId: tenant.environmentId } });

test('a job stores one row with the exact accepted event', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({ properties: { plan: 'pro', seats: 3, tags: ['a', 'b'] }, context: { ip: '10.0.0.1' } });
  const job = jobFor(tenant, body);

  t.true(await persistEvent(h.db, job));

  t.is(await rowsOf(tenant), 1);
  const stored = await findEvent(h.db, tenant.environmentId, job.messageId);
  t.truthy(stored);
  t.is(stored!.status, 'processed');
  t.is(stored!.error, null);
  t.is(stored!.receivedAt, job.receivedAt);
  t.deepEqual(stored!.event, {
    type: 'track',
    messageId: body.messageId,
    event: 'Signed Up',
    userId: 'user-1',
    anonymousId: null,
    timestamp: '2024-05-01T10:00:00Z',
    properties: { plan: 'pro', seats: 3, tags: ['a', 'b'] },
    context: { ip: '10.0.0.1' },
    integrations: {},
  });
  const row = await h.db.event.findFirstOrThrow({ where: { environmentId: tenant.environmentId } });
  t.is(row.timestamp.toISOString(), '2024-05-01T10:00:00.000Z');
  t.is(row.payload, job.payload);
});

test('the same job twice stores one row; the second run reports nothing inserted', async (t) => {
  const tenant = await newTenant(h);
  const job = jobFor(tenant, trackBody());

  t.true(await persistEvent(h.db, job));
  t.false(await persistEvent(h.db, job));
  // A redelivery that would record `failed` after the event was stored changes nothing either.
  t.false(await persistEvent(h.db, job, 'failed', 'late failure'));

  t.is(await rowsOf(tenant), 1);
  const stored = await findEvent(h.db, tenant.environmentId, job.messageId);
  t.is(stored!.status, 'processed');
  t.is(stored!.error, null);
});

test('the same messageId in two environments is two events', async (t) => {
  const a = await newTenant(h);
  const b = await newTenant(h);
  const body = trackBody();

  t.true(await persistEvent(h.db, jobFor(a, body)));
  t.true(await persistEvent(h.db, jobFor(b, body)));

  t.is(await rowsOf(a), 1);
  t.is(await rowsOf(b), 1);
});

const limitCases: [string, Record<string, unknown>, { withinLimits: boolean; drivesJourneys: boolean; limitReason: string | null }][] = [
  ['an event with a userId', { properties: { ok: true } }, { withinLimits: true, drivesJourneys: true, limitReason: null }],
  ['an anonymous-only event', { userId: undefined, anonymousId: 'anon-1' }, { withinLimits: true, drivesJourneys: false, limitReason: null }],
  [
    'a whitespace-only userId next to an anonymousId',
    { userId: '   ', anonymousId: 'anon-1' },
    { withinLimits: true, drivesJourneys: false, limitReason: null },
  ],
  ['a null character in a property value', { properties: { note: 'a\u0000b' } }, { withinLimits: false, drivesJourneys: false, limitReason: 'null_character' }],
  ['a null character in a property key', { properties: { 'k\u0000': 1 } }, { withinLimits: false, drivesJourneys: false, limitReason: 'null_character' }],
  ['properties over 128 KB', { properties: { blob: 'x'.repeat(131_072) } }, { withinLimits: false, drivesJourneys: false, limitReason: 'too_large' }],
  ['properties just under 128 KB', { properties: { blob: 'x'.repeat(131_072 - 100) } }, { withinLimits: true, drivesJourneys: true, limitReason: null }],
  ['properties nested 100 levels', { properties: nested(100) }, { withinLimits: true, drivesJourneys: true, limitReason: null }],
  ['properties nested 101 levels', { properties: nested(101) }, { withinLimits: false, drivesJourneys: false, limitReason: 'too_deep' }],
];

for (const [title, overrides, expected] of limitCases) {
  test(`journey limits recorded: ${title}`, async (t) => {
    const tenant = await newTenant(h);
    const body = trackBody(overrides);
    if (overrides.userId === undefined && 'userId' in overrides) delete body.userId;
    const job = jobFor(tenant, body);

    t.true(await persistEvent(h.db, job));

    const stored = await findEvent(h.db, tenant.environmentId, job.messageId);
    t.like(stored, { status: 'processed', ...expected });
    // Outside the limits the event is still stored exactly as accepted (counted for analytics).
    t.deepEqual(stored!.event, JSON.parse(job.payload));
  });
}

test('IDs and event names with NUL and backslashes store and read back exactly', async (t) => {
  const tenant = await newTenant(h);
  // Pairs an escaping scheme could confuse: NUL vs the two characters `\0`, `\` vs `\\`.
  const variants = [
    { messageId: 'm\u0000x', event: 'E\u0000', userId: 'u\u0000' },
    { messageId: 'm\\0x', event: 'E\\0', userId: 'u\\0' },
    { messageId: 'm\\x', event: 'E\\', userId: 'u\\' },
    { messageId: 'm\\\\x', event: 'E\\\\', userId: 'u\\\\' },
    { messageId: '\\\u0000\\\\\u0000\u0000', event: '\u0000', userId: '\\', anonymousId: 'a\u0000\\' },
  ];
  const jobs = variants.map((v) => jobFor(tenant, trackBody(v)));

  for (const job of jobs) t.true(await persistEvent(h.db, job), JSON.stringify(job.messageId));
  // All different messageIds: none may collide with another after escaping.
  t.is(await rowsOf(tenant), variants.length);
  for (const job of jobs) t.false(await persistEvent(h.db, job));
  t.is(await rowsOf(tenant), variants.length);

  for (const [i, job] of jobs.entries()) {
    const stored = await findEvent(h.db, tenant.environmentId, job.messageId);
    t.truthy(stored, JSON.stringify(job.messageId));
    t.is(stored!.messageId, variants[i].messageId);
    const event = stored!.event as Record<string, unknown>;
    t.is(event.messageId, variants[i].messageId);
    t.is(event.event, variants[i].event);
    t.is(event.userId, variants[i].userId);
    t.is(event.anonymousId, variants[i].anonymousId ?? null);
  }
  // Lookups by a messageId that was never sent find nothing, even if it escapes alike.
  t.is(await findEvent(h.db, tenant.environmentId, 'm\\\u0000x'), null);
  t.is(await findEvent(h.db, tenant.environmentId, 'mx'), null);

  // The custom events list shows the exact names.
  const names = await eventNames(h.db, tenant.environmentId, 30);
  t.deepEqual(
    names.map((n) => [n.event, n.count]).sort(),
    [
      ['E\u0000', 1],
      ['E\\0', 1],
      ['E\\', 1],
      ['E\\\\', 1],
      ['\u0000', 1],
    ].sort(),
  );
});

test('properties nested 50,000 levels deep are accepted over HTTP and stored by a worker', async (t) => {
  const tenant = await newTenant(h);
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());

  const depth = 50_000;
  const deep = '{"a":'.repeat(depth - 1) + '{}' + '}'.repeat(depth - 1);
  t.throws(() => JSON.stringify(JSON.parse(deep)), { instanceOf: RangeError });
  const messageId = `deep-${Date.now()}`;
  // The body is written in the stored field order, so the stored payload is byte for byte
  // the body with the defaults added.
  const head = `{"type":"track","messageId":"${messageId}","event":"Deep","userId":"u-deep","anonymousId":null,"timestamp":"2024-05-01T10:00:00Z","properties":`;
  const body = `${head}${deep}}`;
  const expectedPayload = `${head}${deep},"context":{},"integrations":{}}`;

  const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
  t.is(reply.status, 202, reply.text);
  t.deepEqual(reply.json, { message_id: messageId, status: 'accepted' });

  const row = await eventually(() => h.db.event.findFirst({ where: { environmentId: tenant.environmentId } }), { timeoutMs: 30_000 });
  t.truthy(row, 'the worker stored the event');
  t.is(row!.status, 'processed');
  t.is(row!.messageId, messageId);
  t.is(row!.payload, expectedPayload);
  t.false(row!.withinLimits);
  t.is(row!.limitReason, 'too_deep');
  t.false(row!.drivesJourneys);
  t.is(await rowsOf(tenant), 1);

  // findEvent parses the stored text back (JSON.parse handles any depth).
  const stored = await findEvent(h.db, tenant.environmentId, messageId);
  const event = stored!.event as { properties: unknown };
  let levels = 0;
  for (let p: unknown = event.properties; p && typeof p === 'object'; p = (p as { a?: unknown }).a) levels++;
  t.is(levels, depth);
});
