// Identifiers of any length (issue 10): random, incompressible values of 3 KB, 20 KB and 100 KB as
// messageId, userId, anonymousId, event name, email and phone. A btree entry cannot pass ~2.7 KB,
// so every index on such a value holds its digest: a plain index would refuse the row (a Track
// event accepted and never stored, an Identify answered 500 on every retry). Each case runs
// through the public API and a real worker, and reads back what a caller or an operator would.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { consentGet } from '../../cli/commands/consent.ts';
import { eventsGet } from '../../cli/commands/events.ts';
import { journeyCreate, journeyPublish, journeyStatsCommand } from '../../cli/commands/journey.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { randomText } from '../helpers/random-text.ts';
import { harnessWithGatewayAndWorker, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

// The file's tests run at once and poll while the in-process worker uses the same pool: room
// for both, so a busy machine does not turn waits for a connection into failures.
harnessWithGatewayAndWorker(test, (...opened) => ([h, gateway] = opened), {
  env: { WORKER_BATCH_WAIT_MS: '2', JOURNEY_TICK_MS: '50', JOURNEY_GRACE_MS: '500', DATABASE_POOL_SIZE: '10' },
  ownPool: true,
  emptied: true,
});

const SIZES = [3_000, 20_000, 100_000];
const kb = (n: number) => `${n / 1000} KB`;

const post = (tenant: Tenant, api: 'track' | 'identify', body: unknown): Promise<Reply> =>
  request(gateway.url, `/api/${api}/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body, timeoutMs: 30_000 });

const readProfile = (tenant: Tenant, userId: string) =>
  request(gateway.url, `/api/profiles/${tenant.slug}/${encodeURIComponent(userId)}`, {
    method: 'GET',
    headers: { 'x-api-key': tenant.key },
    timeoutMs: 30_000,
  });

const storedEvent = (tenant: Tenant, messageId: string) =>
  eventually(
    async () => {
      const got = (await eventsGet(h.operator, [tenant.slug, '--', messageId])) as { status: string; event: Record<string, unknown> };
      return got.status === 'processed' ? got : null;
    },
    { timeoutMs: 60_000, intervalMs: 300 },
  );

const rowsOf = (tenant: Tenant) => h.db.event.count({ where: { environmentId: tenant.environmentId } });

for (const size of SIZES) {
  for (const field of ['messageId', 'userId', 'anonymousId', 'event'] as const) {
    test(`Track: a ${kb(size)} ${field} is stored once, and a retry is a duplicate`, async (t) => {
      const tenant = await newTenant(h);
      const value = randomText(size);
      const body = trackBody({ [field]: value, ...(field === 'anonymousId' ? { userId: null } : {}) });
      const messageId = body.messageId as string;
      for (let attempt = 0; attempt < 3; attempt++) {
        const reply = await post(tenant, 'track', body);
        t.is(reply.status, 202, reply.text);
        t.is(reply.json.message_id, messageId);
      }
      const stored = await storedEvent(tenant, messageId);
      t.truthy(stored, 'stored as processed');
      t.is(stored!.event[field], value);
      t.is(await rowsOf(tenant), 1);
    });
  }

  test(`Track: two ${kb(size)} messageIds that differ only in their last character are two events`, async (t) => {
    const tenant = await newTenant(h);
    const base = randomText(size);
    for (const messageId of [`${base}a`, `${base}b`]) t.is((await post(tenant, 'track', trackBody({ messageId }))).status, 202);
    t.truthy(await storedEvent(tenant, `${base}a`));
    t.truthy(await storedEvent(tenant, `${base}b`));
    t.is(await rowsOf(tenant), 2);
  });

  test(`Identify: a ${kb(size)} userId and messageId answer 200, read back through Profiles, retry is a duplicate, reuse a 409`, async (t) => {
    const tenant = await newTenant(h);
    // Identify trims both IDs (spec): random text that began or ended with a space came back shorter.
    const userId = `u${randomText(size - 2)}u`;
    const messageId = `m${randomText(size - 2)}m`;
    const body = { userId, messageId, traits: { plan: 'pro' }, timestamp: '2024-05-01T10:00:00Z' };
    const first = await post(tenant, 'identify', body);
    t.is(first.status, 200, first.text);
    t.deepEqual(first.json, { success: true, messageId, duplicate: false });
    const again = await post(tenant, 'identify', body);
    t.deepEqual(again.json, { success: true, messageId, duplicate: true });
    const reuse = await post(tenant, 'identify', { ...body, traits: { plan: 'free' } });
    t.is(reuse.status, 409);
    t.deepEqual(reuse.json, { error: `messageId ${messageId} was already used for a different call` });

    const read = await readProfile(tenant, userId);
    t.is(read.status, 200, read.text.slice(0, 200));
    t.is(read.json.user_id, userId);
    t.deepEqual(read.json.fields, { plan: 'pro' });
    // A user ID that shares all but its last character is another person.
    t.is((await readProfile(tenant, `${[...userId].slice(0, -1).join('')}~`)).status, 404);
  });

  test(`Identify: a ${kb(size)} email and phone with consent answer 200 and the decisions apply to those addresses`, async (t) => {
    const tenant = await newTenant(h);
    const email = `${randomText(size, 'abcdefghijklmnopqrstuvwxyz0123456789')}@example.com`;
    const phone = `+${randomText(size, '0123456789')}`;
    const reply = await post(tenant, 'identify', {
      userId: 'u-1',
      traits: { email, phone },
      consent: [
        { channel: 'email', status: 'granted', basis: 'consent', consentedAt: Date.parse('2024-05-01T10:00:00Z') },
        { channel: 'sms', status: 'withdrawn', consentedAt: Date.parse('2024-05-01T10:00:00Z') },
      ],
    });
    t.is(reply.status, 200, reply.text);
    const emailDecision = (await consentGet(h.operator, [tenant.slug, 'email', email])) as { status: string } | null;
    const smsDecision = (await consentGet(h.operator, [tenant.slug, 'sms', phone])) as { status: string } | null;
    t.is(emailDecision?.status, 'granted');
    t.is(smsDecision?.status, 'withdrawn');
    // A later decision for the same long address replaces it; another address is untouched.
    t.is((await post(tenant, 'identify', { userId: 'u-1', traits: {}, consent: [{ channel: 'email', status: 'withdrawn' }] })).status, 200);
    t.is(((await consentGet(h.operator, [tenant.slug, 'email', email])) as { status: string }).status, 'withdrawn');
    t.is(await consentGet(h.operator, [tenant.slug, 'email', `${email.slice(0, -1)}x`]), null);
  });

  test(`Identify: join by email with a ${kb(size)} email`, async (t) => {
    const tenant = await newTenant(h, 'join-by-email');
    const email = `${randomText(size, 'abcdefghijklmnopqrstuvwxyz0123456789')}@example.com`;
    t.is((await post(tenant, 'identify', { userId: 'first', traits: { email, plan: 'pro' } })).status, 200);
    t.is((await post(tenant, 'identify', { userId: 'second', traits: { email, seats: 3 } })).status, 200);
    const [a, b] = [await readProfile(tenant, 'first'), await readProfile(tenant, 'second')];
    t.is(a.json.profile_id, b.json.profile_id);
    t.deepEqual(b.json.fields, { email, plan: 'pro', seats: 3 });
  });
}

test('Journeys: a person with a 100 KB userId enters a published journey, once per messageId', async (t) => {
  const tenant = await newTenant(h);
  const dir = await mkdtemp(path.join(tmpdir(), 'intake-long-'));
  const file = path.join(dir, 'journey.json');
  await writeFile(file, JSON.stringify({ name: 'Long', entry: { event: 'Signed Up' }, steps: [{ delay: { ms: 60_000 } }], reentry: true }));
  const { id } = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
  await journeyPublish(h.operator, [tenant.slug, id]);
  const userId = randomText(100_000);
  const body = trackBody({ userId, event: 'Signed Up', messageId: randomText(20_000) });
  const second = trackBody({ userId, event: 'Signed Up' });
  for (const sent of [body, body, second]) t.is((await post(tenant, 'track', sent)).status, 202);
  for (const sent of [body, second]) t.truthy(await storedEvent(tenant, sent.messageId as string));
  const event = (await storedEvent(tenant, body.messageId as string)) as unknown as { drivesJourneys: boolean };
  t.true(event.drivesJourneys);
  const stats = await eventually(
    async () => {
      const s = (await journeyStatsCommand(h.operator, [tenant.slug, id])) as { entered: number; active: number };
      return s.entered >= 1 ? s : null;
    },
    { timeoutMs: 30_000 },
  );
  // One active run per person and journey: the second event (a new messageId) cannot start another.
  t.like(stats, { entered: 1, active: 1 });
});

test('Identify: 20,000 traits in one call answer 200 (not the 500 of a statement timeout), again as an update, and read back', async (t) => {
  const tenant = await newTenant(h);
  const traits = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`trait_${i}`, i]));
  t.is((await post(tenant, 'identify', { userId: 'wide', traits })).status, 200);
  const update = await post(tenant, 'identify', { userId: 'wide', traits: { ...traits, trait_0: 'changed' } });
  t.is(update.status, 200, update.text);
  const read = await readProfile(tenant, 'wide');
  t.is(Object.keys(read.json.fields).length, 20_000);
  t.is(read.json.fields.trait_0, 'changed');
  t.is(read.json.fields.trait_19999, 19_999);
});
