// Identify calls for one user racing through two gateway processes: the outcome must be the
// one of applying them one after the other (per-trait merge, idempotency, consent), never a
// lost update, a second profile or a messageId applied twice.
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { consentGet } from '../../cli/commands/consent.ts';
import { SERVICE_EVENTS } from '../../identify/outbox.ts';
import { messageKeyOf } from '../../identify/identify-write.ts';
import { request, type Reply } from '../helpers/http.ts';
import { harnessWithProcesses, spawnTwoGateways } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let urls: [string, string];

harnessWithProcesses(test, async (opened, children) => {
  h = opened;
  const gateways = await spawnTwoGateways(h.env, children);
  urls = [gateways[0].url, gateways[1].url];
});

const BASE = Date.parse('2024-05-01T10:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();
const uid = (prefix: string) => `${prefix}-${randomBytes(4).toString('hex')}`;

function identify(i: number, tenant: Tenant, body: Record<string, unknown>): Promise<Reply> {
  return request(urls[i % 2], `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
}

function readProfile(tenant: Tenant, userId: string): Promise<Reply> {
  return request(urls[0], `/api/profiles/${tenant.slug}/${encodeURIComponent(userId)}`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
}

/** Fires every call at once, alternating between the two gateways. */
function race(tenant: Tenant, bodies: Record<string, unknown>[]): Promise<Reply[]> {
  return Promise.all(bodies.map((b, i) => identify(i, tenant, b)));
}

function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/** The stored per-trait times of a user's profile. */
async function traitTimes(tenant: Tenant, userId: string): Promise<Record<string, number>> {
  const link = await h.db.profileUser.findFirstOrThrow({
    where: { environmentId: tenant.environmentId, userId },
    include: { profile: true },
  });
  return JSON.parse(link.profile.traitTimes);
}

/** profile_fields_changed payloads of one user, in the order their transactions wrote them. */
async function fieldChanges(tenant: Tenant, userId: string): Promise<{ messageId: string; at: number; changed: Record<string, unknown> }[]> {
  const rows = await h.db.outboxEvent.findMany({
    where: { environmentId: tenant.environmentId, kind: SERVICE_EVENTS.profileFieldsChanged },
    orderBy: { id: 'asc' },
  });
  return rows.map((r) => JSON.parse(r.payload)).filter((p) => p.userId === userId);
}

test('40 calls for one user at once through two gateways: every trait kept, the latest timestamp wins', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const N = 40;
  for (let round = 0; round < 3; round++) {
    const userId = uid('racer');
    // Timestamps in an order unrelated to the order of sending.
    const times = shuffled(Array.from({ length: N }, (_, k) => BASE + round * 3_600_000 + k * 1000));
    const bodies = times.map((time, i) => ({ userId, timestamp: iso(time), traits: { [`t${i}`]: i, last: `v${i}`, nested: { from: i } } }));
    const replies = await race(tenant, bodies);
    for (const r of replies) {
      t.is(r.status, 200, r.text);
      t.like(r.json, { success: true, duplicate: false });
    }

    const newest = times.indexOf(Math.max(...times));
    const expected: Record<string, unknown> = { last: `v${newest}`, nested: { from: newest } };
    for (let i = 0; i < N; i++) expected[`t${i}`] = i;
    const got = await readProfile(tenant, userId);
    t.is(got.status, 200, got.text);
    t.deepEqual(got.json.fields, expected, `round ${round}: the profile is the sequential result`);
    t.is(got.json.updated_at, Math.max(...times));
    t.is(got.json.user_id, userId);

    const stored = await traitTimes(tenant, userId);
    t.is(stored.last, Math.max(...times));
    for (let i = 0; i < N; i++) t.is(stored[`t${i}`], times[i]);
    // Each call added a trait, so each wrote exactly one service event.
    t.is((await fieldChanges(tenant, userId)).length, N);
  }
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), 3);
});

test('equal timestamps racing on one trait: one sent value wins, with that time; older calls then lose, equal ones win', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const N = 20;
  for (let round = 0; round < 3; round++) {
    const userId = uid('tie');
    const T = BASE + round * 3_600_000;
    t.is((await identify(0, tenant, { userId, timestamp: iso(T - 10_000), traits: { tie: 'seed' } })).status, 200);

    const sent = Array.from({ length: N }, (_, i) => `v${i}`);
    const replies = await race(
      tenant,
      sent.map((v, i) => ({ userId, timestamp: iso(T), traits: { tie: v, [`e${i}`]: true } })),
    );
    t.true(
      replies.every((r) => r.status === 200),
      replies.map((r) => r.text).join('\n'),
    );

    const got = await readProfile(tenant, userId);
    t.true(sent.includes(got.json.fields.tie), `final value ${got.json.fields.tie} is one of the sent values`);
    for (let i = 0; i < N; i++) t.is(got.json.fields[`e${i}`], true);
    t.is(got.json.updated_at, T);
    t.is((await traitTimes(tenant, userId)).tie, T);
    // Equal times: the later-applied call wins, so the value is the one written by the last
    // of these transactions (outbox ids follow the order in which they held the user's lock).
    const changes = await fieldChanges(tenant, userId);
    t.is(changes.length, N + 1);
    t.is(changes.at(-1)!.changed.tie, got.json.fields.tie);

    t.is((await identify(1, tenant, { userId, timestamp: iso(T - 1), traits: { tie: 'older' } })).status, 200);
    t.is((await readProfile(tenant, userId)).json.fields.tie, got.json.fields.tie, 'an older call does not override it');
    t.is((await identify(0, tenant, { userId, timestamp: iso(T), traits: { tie: 'equal-later' } })).status, 200);
    t.is((await readProfile(tenant, userId)).json.fields.tie, 'equal-later', 'an equal-time call arriving later wins');
  }
});

test('concurrent first calls for a new user create exactly one profile', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const N = 12;
  const users: string[] = [];
  for (let round = 0; round < 5; round++) {
    const userId = uid('fresh');
    users.push(userId);
    // Some calls pad the user ID with spaces: it is stored trimmed, so the same profile.
    const bodies = Array.from({ length: N }, (_, i) => ({ userId: i % 3 === 0 ? `  ${userId} ` : userId, timestamp: iso(BASE + i), traits: { [`f${i}`]: i } }));
    const replies = await race(tenant, bodies);
    t.true(
      replies.every((r) => r.status === 200),
      replies.map((r) => r.text).join('\n'),
    );

    t.is(await h.db.profileUser.count({ where: { environmentId: tenant.environmentId, userId } }), 1);
    const got = await readProfile(tenant, userId);
    t.is(got.status, 200, got.text);
    t.deepEqual(got.json.fields, Object.fromEntries(Array.from({ length: N }, (_, i) => [`f${i}`, i])));
    t.is(got.json.updated_at, BASE + N - 1);
  }
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), users.length);
  t.is(await h.db.profileUser.count({ where: { environmentId: tenant.environmentId } }), users.length);
});

test('the same messageId raced on both gateways is applied once: one duplicate false, the rest duplicate true', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const userId = uid('idem');
  for (let round = 0; round < 8; round++) {
    const messageId = `race-${round}-${randomBytes(3).toString('hex')}`;
    const body = { userId, messageId, timestamp: iso(BASE + round * 1000), traits: { round, [`r${round}`]: true } };
    // Three copies to each gateway, all at once.
    const replies = await race(
      tenant,
      Array.from({ length: 6 }, () => body),
    );
    for (const r of replies) {
      t.is(r.status, 200, r.text);
      t.is(r.json.messageId, messageId);
      t.is(r.json.success, true);
    }
    t.is(replies.filter((r) => r.json.duplicate === false).length, 1, `round ${round}: applied exactly once`);
    t.is(replies.filter((r) => r.json.duplicate === true).length, 5);
    t.is(await h.db.identifyMessage.count({ where: { environmentId: tenant.environmentId, messageKey: messageKeyOf(messageId) } }), 1);
    t.is((await fieldChanges(tenant, userId)).filter((c) => c.messageId === messageId).length, 1, 'one service event');
  }
  const got = await readProfile(tenant, userId);
  t.is(got.json.fields.round, 7);
  t.is(got.json.updated_at, BASE + 7000);
});

test('the same messageId with different traits raced: one call applied, the other 409, the profile holds the applied one', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  for (let round = 0; round < 6; round++) {
    const userId = uid('conflict');
    const messageId = `conflict-${round}-${randomBytes(3).toString('hex')}`;
    const bodies = ['a', 'b'].map((side) => ({ userId, messageId, timestamp: iso(BASE), traits: { side } }));
    const replies = await race(tenant, bodies);
    const applied = replies.findIndex((r) => r.status === 200);
    t.not(applied, -1, replies.map((r) => r.text).join('\n'));
    t.like(replies[applied].json, { success: true, messageId, duplicate: false });
    const other = replies[1 - applied];
    t.is(other.status, 409, other.text);
    t.deepEqual(other.json, { error: `messageId ${messageId} was already used for a different call` });
    const got = await readProfile(tenant, userId);
    t.deepEqual(got.json.fields, bodies[applied].traits);
  }
});

test('consent decisions for one address raced: the newest wins whatever the arrival order; equal times go to withdrawn', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const decision = (address: string) => consentGet(h.operator, [tenant.slug, 'email', address]);
  const consentCall = (userId: string, email: string, status: string, at: number) => ({
    userId,
    timestamp: iso(at),
    traits: { email },
    consent: [{ channel: 'email', status, consentedAt: at }],
  });

  // One user, granted at t1 and withdrawn at t2 at the same moment, which is newer alternating.
  for (let round = 0; round < 6; round++) {
    const userId = uid('consent');
    const email = `${userId}@example.com`;
    const [granted, withdrawn] = round % 2 ? [BASE + 2000, BASE + 1000] : [BASE + 1000, BASE + 2000];
    const bodies = [consentCall(userId, email, 'granted', granted), consentCall(userId, email, 'withdrawn', withdrawn)];
    const replies = await race(tenant, round % 4 < 2 ? bodies : bodies.reverse());
    t.true(
      replies.every((r) => r.status === 200),
      replies.map((r) => r.text).join('\n'),
    );
    const got = await decision(email);
    t.like(got, { status: granted > withdrawn ? 'granted' : 'withdrawn', decidedAt: Math.max(granted, withdrawn) }, `round ${round}`);
  }

  // Several users sharing one address (no join-by-email): only the address lock orders them.
  for (let round = 0; round < 3; round++) {
    const email = `${uid('shared')}@example.com`;
    const times = shuffled(Array.from({ length: 10 }, (_, k) => BASE + k * 1000));
    const statuses = times.map((_, i) => (i % 2 ? 'granted' : 'withdrawn'));
    const replies = await race(
      tenant,
      times.map((at, i) => consentCall(uid('sharer'), email, statuses[i], at)),
    );
    t.true(
      replies.every((r) => r.status === 200),
      replies.map((r) => r.text).join('\n'),
    );
    const newest = times.indexOf(Math.max(...times));
    t.like(await decision(email), { status: statuses[newest], decidedAt: times[newest] });
  }

  // Equal times: withdrawn wins, in either arrival order.
  for (let round = 0; round < 4; round++) {
    const userId = uid('equal');
    const email = `${userId}@example.com`;
    const bodies = [consentCall(userId, email, 'granted', BASE), consentCall(userId, email, 'withdrawn', BASE)];
    const replies = await race(tenant, round % 2 ? bodies.reverse() : bodies);
    t.true(replies.every((r) => r.status === 200));
    t.like(await decision(email), { status: 'withdrawn', decidedAt: BASE });
  }

  // In sequence, an older decision arriving after a newer one does not replace it.
  const userId = uid('late');
  const email = `${userId}@example.com`;
  t.is((await identify(0, tenant, consentCall(userId, email, 'withdrawn', BASE + 5000))).status, 200);
  t.is((await identify(1, tenant, consentCall(userId, email, 'granted', BASE + 1000))).status, 200);
  t.like(await decision(email), { status: 'withdrawn', decidedAt: BASE + 5000 });
});

test('join-by-email calls racing (two users swapping emails, two users sending one email) all answer 200 and end as if applied in turn', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  for (let round = 0; round < 8; round++) {
    const [a, b, c, d] = [uid('a'), uid('b'), uid('c'), uid('d')];
    const [e1, e2, e3] = [`${uid('one')}@shop.io`, `${uid('two')}@shop.io`, `${uid('three')}@shop.io`];
    const setup = await race(tenant, [
      { userId: a, traits: { email: e1 } },
      { userId: b, traits: { email: e2 } },
      { userId: c, traits: { email: e3 } },
    ]);
    t.deepEqual(
      setup.map((r) => r.status),
      [200, 200, 200],
    );
    // a and b each take the other's email; d joins c's email while c sends it again.
    const replies = await race(tenant, [
      { userId: a, traits: { email: e2, p: 1 } },
      { userId: b, traits: { email: e1, q: 1 } },
      { userId: d, traits: { email: e3, r: 1 } },
      { userId: c, traits: { email: e3, s: 1 } },
    ]);
    t.deepEqual(
      replies.map((r) => `${r.status} ${r.text}`.slice(0, 60)),
      replies.map((r) => `200 ${r.text}`.slice(0, 60)),
    );
    const [pc, pd] = await Promise.all([readProfile(tenant, c), readProfile(tenant, d)]);
    t.is(pc.json.profile_id, pd.json.profile_id, 'd joined c');
    t.like(pc.json.fields, { email: e3, r: 1, s: 1 });
  }
});

test('two gateways racing batches over the same users in opposite orders: no 500, no deadlock left unresolved, every call applied', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  const users = Array.from({ length: 30 }, (_, i) => uid(`cross${i}`));
  for (let round = 0; round < 4; round++) {
    const T = BASE + round * 1000;
    // Gateway 0 gets the users in order, gateway 1 in reverse, at once: their batches lock overlapping users.
    const body = (u: string, g: number) => ({
      userId: u,
      timestamp: iso(T),
      traits: { [`g${g}r${round}`]: true, email: `${u}@example.com` },
      consent: [{ channel: 'email', status: 'granted' }],
    });
    const replies = await Promise.all([
      ...users.map((u) => identify(0, tenant, body(u, 0))),
      ...[...users].reverse().map((u) => identify(1, tenant, body(u, 1))),
    ]);
    for (const r of replies) t.is(r.status, 200, r.text);
  }
  for (const u of users) {
    const got = await readProfile(tenant, u);
    for (let round = 0; round < 4; round++) t.like(got.json.fields, { [`g0r${round}`]: true, [`g1r${round}`]: true });
  }
});
