// intake users forget end to end: data sent through a real gateway and worker, erased with the
// operator command, every table counted by SQL afterwards; events queued before the erasure
// and Identify calls racing it bring nothing back.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { Worker, type Queue } from 'bullmq';
import { createRedis } from '../../platform/redis.ts';
import { journeyCreate, journeyPublish } from '../../cli/commands/journey.ts';
import { usersAudit, usersForget, usersSuppress } from '../../cli/commands/users.ts';
import { identityHash } from '../../platform/identity-hash.ts';
import { toPgText } from '../../platform/pg-text.ts';
import { poolOf } from '../../platform/db.ts';
import { applyIdentifyBatch } from '../../identify/identify-batch.ts';
import { userHashOf, userLock } from '../../profiles/person.ts';
import { toIdentifyCall } from '../../identify/identify-plan.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import { messageKeyOf } from '../../identify/identify-write.ts';
import { identifyCallsKey } from '../../platform/live-keys.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { acceptedTrack, appliedIdentify, request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: { url: string; close(): Promise<void> };
let dir: string;

test.before(async () => {
  h = await openHarness({ JOURNEY_TICK_MS: '50', JOURNEY_GRACE_MS: '300', WORKER_BATCH_WAIT_MS: '2' });
  gateway = await gatewayInProcess(h, { ownPool: true });
  dir = await mkdtemp(path.join(tmpdir(), 'intake-erasure-'));
});

test.after.always(async () => {
  await gateway?.close();
  await h?.close();
});

const track = (tenant: Tenant, body: Record<string, unknown>) => acceptedTrack(gateway.url, tenant, body);
const identify = (tenant: Tenant, body: Record<string, unknown>) => appliedIdentify(gateway.url, tenant, body);

const queueEmpty = async () => {
  const c = await h.operator.eventsQueue().getJobCounts('wait', 'active', 'delayed', 'prioritized');
  return Object.values(c).every((n) => n === 0);
};

const count = async (sql: string, ...values: unknown[]) => Number((await h.db.$queryRawUnsafe<{ n: bigint }[]>(sql, ...values))[0].n);

/** Every row of every table that holds something of these user IDs, counted by SQL. */
async function rowsOf(tenant: Tenant, userIds: string[], messageIds: string[], emails: string[]) {
  const env = tenant.environmentId;
  const hashes = userIds.map((u) => identityHash(u));
  const keys = messageIds.map((m) => messageKeyOf(toPgText(m)));
  const profileIds = `SELECT profile_id FROM profile_users WHERE environment_id = $1::uuid AND user_hash = ANY($2::bytea[])`;
  return {
    profiles: await count(`SELECT count(*) AS n FROM profiles WHERE id IN (${profileIds})`, env, hashes),
    profileUsers: await count(`SELECT count(*) AS n FROM profile_users WHERE environment_id = $1::uuid AND user_hash = ANY($2::bytea[])`, env, hashes),
    profilesWithEmail: await count(`SELECT count(*) AS n FROM profiles WHERE environment_id = $1::uuid AND email = ANY($2::text[])`, env, emails),
    addressClaims: await count(
      `SELECT count(*) AS n FROM address_claims c JOIN profiles p ON p.id = c.profile_id WHERE p.environment_id = $1::uuid AND c.value = ANY($2::text[])`,
      env,
      emails,
    ),
    emailDecisions: await count(`SELECT count(*) AS n FROM consent_decisions WHERE environment_id = $1::uuid AND address = ANY($2::text[])`, env, emails),
    events: await count(`SELECT count(*) AS n FROM events WHERE environment_id = $1::uuid AND user_id = ANY($2::text[])`, env, userIds),
    journeyRuns: await count(`SELECT count(*) AS n FROM journey_runs WHERE environment_id = $1::uuid AND user_hash = ANY($2::bytea[])`, env, hashes),
    journeyMessages: await count(
      `SELECT count(*) AS n FROM journey_messages m JOIN journeys j ON j.id = m.journey_id WHERE j.environment_id = $1::uuid AND m.address = ANY($2::text[])`,
      env,
      emails,
    ),
    identifyMessages: await count(`SELECT count(*) AS n FROM identify_messages WHERE environment_id = $1::uuid AND message_key = ANY($2::uuid[])`, env, keys),
    outboxEvents: await count(
      `SELECT count(*) AS n FROM outbox_events WHERE environment_id = $1::uuid AND EXISTS (SELECT 1 FROM unnest($2::text[]) u WHERE strpos(payload, u) > 0)`,
      env,
      userIds.map((u) => JSON.stringify(u)),
    ),
  };
}

const NONE = {
  profiles: 0,
  profileUsers: 0,
  profilesWithEmail: 0,
  addressClaims: 0,
  emailDecisions: 0,
  events: 0,
  journeyRuns: 0,
  journeyMessages: 0,
  identifyMessages: 0,
  outboxEvents: 0,
};

test.serial('a person seeded in every table is forgotten: every table holds zero rows of them, and another profile keeps its shared address', async (t) => {
  const tenant = await newTenant(h, 'join-by-email,attribute-trigger');
  const file = path.join(dir, 'welcome.json');
  await writeFile(file, JSON.stringify({ name: 'Welcome', entry: { event: 'Signed Up' }, steps: [{ send: { channel: 'email', template: 'welcome' } }] }));
  const journey = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
  await journeyPublish(h.operator, [tenant.slug, journey.id]);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());

  const email = 'ada@example.com';
  const phone = '+15550100';
  const granted = { channel: 'email', status: 'granted', basis: 'consent', consentedAt: Date.now() - 1000 };
  const sms = { channel: 'sms', status: 'granted', basis: 'consent', consentedAt: Date.now() - 1000 };
  const messageIds = ['m-ada-1', 'm-ada-2', 'm-web-1'];
  await identify(tenant, { userId: 'ada', messageId: messageIds[0], traits: { email, phone, name: 'Ada' }, consent: [granted, sms] });
  await identify(tenant, { userId: 'ada', messageId: messageIds[1], traits: { plan: 'pro' } });
  // Joined by email: a second user ID reads the same profile.
  await identify(tenant, { userId: 'ada-web', messageId: messageIds[2], traits: { email: email.toUpperCase(), city: 'London' } });
  // Someone else with the same phone: the SMS decision is theirs as well.
  await identify(tenant, { userId: 'grace', traits: { phone, name: 'Grace' } });
  for (let i = 0; i < 3; i++) await track(tenant, { userId: 'ada', event: i ? 'Viewed' : 'Signed Up' });
  await track(tenant, { userId: 'ada-web', event: 'Viewed' });
  await track(tenant, { anonymousId: 'anon-1', userId: null, event: 'Viewed' });
  await eventually(async () => (await count(`SELECT count(*) AS n FROM journey_messages WHERE journey_id = $1::uuid`, journey.id)) === 1);
  await eventually(queueEmpty);

  const before = await rowsOf(tenant, ['ada', 'ada-web'], messageIds, [email]);
  for (const [kind, n] of Object.entries(before)) if (kind !== 'profilesWithEmail') t.true(n > 0, `seeded ${kind}`);

  // The dashboard's live view holds their Identify calls with the raw user IDs.
  const live = await h.operator.redis();
  const liveUsers = async () =>
    (await live.xrange(identifyCallsKey(h.config.queuePrefix, tenant.environmentId), '-', '+')).map(([, f]) => f[f.indexOf('u') + 1]);
  // Every call recorded (the recorder writes once a second, so Grace's may come a second later).
  await eventually(async () => {
    const users = await liveUsers();
    return ['ada', 'ada-web', 'grace'].every((u) => users.includes(u));
  });

  const summary = await usersForget(h.operator, [tenant.slug, 'ada', '--by', 'dpo@example.com']);
  t.is(summary.liveViewEntries, 3);
  t.deepEqual(await liveUsers(), ['grace']);
  t.deepEqual(summary.joinedUserIds, ['ada-web']);
  t.like(summary.removed, { profiles: 1, userIds: 2, events: 4, journeyRuns: 1, journeyMessages: 1, identifyMessages: 3, consentDecisions: 1 });
  t.is(summary.removed.traits, 5);
  t.is(summary.consentDecisionsKept, 1);
  t.deepEqual(await rowsOf(tenant, ['ada', 'ada-web'], messageIds, [email]), NONE);
  // What is not theirs stays: the anonymous event, Grace's profile and the SMS decision of the shared phone.
  t.is(await count(`SELECT count(*) AS n FROM events WHERE environment_id = $1::uuid AND anonymous_id = 'anon-1'`, tenant.environmentId), 1);
  t.is(await count(`SELECT count(*) AS n FROM consent_decisions WHERE environment_id = $1::uuid AND address = $2`, tenant.environmentId, phone), 1);
  const grace = await request(gateway.url, `/api/profiles/${tenant.slug}/grace`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  t.is(grace.status, 200);
  const ada = await request(gateway.url, `/api/profiles/${tenant.slug}/ada`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  t.is(ada.status, 404);

  // The audit: who, when, how many, and no raw identifier, trait or address.
  const audit = await usersAudit(h.operator, [tenant.slug]);
  t.is(audit.length, 1);
  t.like(audit[0], { action: 'forget', operator: 'dpo@example.com', userHash: summary.userHash, environment: tenant.slug });
  t.not(audit[0].userHash, identityHash('ada').toString('hex'));
  t.is(audit[0].counts.events, 4);
  const stored = JSON.stringify(
    await h.db.$queryRawUnsafe(`SELECT *, encode(user_hash, 'escape') AS raw FROM privacy_audit WHERE environment_id = $1::uuid`, tenant.environmentId),
    (_, v) => (typeof v === 'bigint' ? String(v) : v),
  );
  // As a whole value or word: the row's UUIDs and hash are hex, and 'ada' is a hex run one UUID in ~140 holds.
  const holds = (secret: string) => new RegExp(`(?<!\\w)${secret.replace(/[.+]/g, '\\$&')}(?!\\w)`).test(stored);
  for (const secret of ['ada', email, phone, 'Ada', 'London']) t.false(holds(secret), secret);
});

test.serial('events queued before the erasure store nothing when the worker starts after it; later ones are new data', async (t) => {
  const tenant = await newTenant(h);
  const messageIds = Array.from({ length: 20 }, (_, i) => `queued-${i}-${Date.now()}`);
  for (const messageId of messageIds) await track(tenant, { userId: i(messageId) ? 'bob' : ' bob ', messageId });
  await track(tenant, { userId: 'carol', messageId: 'carol-1' });
  await usersForget(h.operator, [tenant.slug, 'bob']);
  await sleep(5);
  await track(tenant, { userId: 'bob', messageId: 'after-erasure' });

  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  await eventually(queueEmpty);
  const stored = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, select: { messageId: true } });
  t.deepEqual(stored.map((e) => e.messageId).sort(), ['after-erasure', 'carol-1']);
});

const i = (messageId: string) => Number(messageId.split('-')[1]) % 2 === 0;

async function profileOf(tenant: Tenant, userId: string) {
  const rows = await h.db.$queryRawUnsafe<{ updated: bigint }[]>(
    `SELECT floor(extract(epoch FROM p.updated_at) * 1000)::int8 AS updated FROM profiles p JOIN profile_users u ON u.profile_id = p.id
      WHERE u.environment_id = $1::uuid AND u.user_hash = $2`,
    tenant.environmentId,
    identityHash(userId),
  );
  return rows.length ? Number(rows[0].updated) : null;
}

test.serial('an Identify racing the erasure lands before it (and is removed) or after it (new data) or is dropped: 50 races', async (t) => {
  const tenant = await newTenant(h);
  let before = 0;
  let after = 0;
  for (let n = 0; n < 50; n++) {
    const user = `racer-${n}`;
    await identify(tenant, { userId: user, traits: { n } });
    const [, summary] = await Promise.all([
      sleep(n % 5).then(() => identify(tenant, { userId: user, traits: { n, again: true } })),
      sleep((n * 3) % 4).then(() => usersForget(h.operator, [tenant.slug, user])),
    ]);
    // No timestamp was sent, so the profile's time is the call's receipt: one left behind must have been received after the erasure.
    const updated = await profileOf(tenant, user);
    if (updated === null) before++;
    else {
      after++;
      t.true(updated > summary.erasedAt, `${user}: a profile received at ${updated} is left after the erasure at ${summary.erasedAt}`);
    }
  }
  t.log(`removed or dropped: ${before}, received after the erasure: ${after}`);
  t.is(before + after, 50);
});

test.serial('with --suppress, an Identify racing the erasure never leaves a profile: 50 races', async (t) => {
  const tenant = await newTenant(h);
  for (let n = 0; n < 50; n++) {
    const user = `quiet-${n}`;
    await identify(tenant, { userId: user, traits: { n } });
    await Promise.all([
      sleep(n % 5).then(() => identify(tenant, { userId: user, traits: { n, again: true } })),
      sleep((n * 3) % 4).then(() => usersForget(h.operator, [tenant.slug, user, '--suppress'])),
    ]);
    t.is(await profileOf(tenant, user), null, user);
  }
});

test.serial('an Identify received before the erasure but committing after it is dropped: answered 200, nothing stored, its messageId not kept', async (t) => {
  const tenant = await newTenant(h);
  const userKey = toPgText('held');
  // Hold the lock Identify's batch takes for this user, so the call waits inside its transaction.
  const holder = await poolOf(h.db).connect();
  t.teardown(() => holder.release());
  await holder.query('BEGIN');
  await holder.query('SELECT pg_advisory_xact_lock($1)', [userLock(tenant.environmentId, userKey).toString()]);
  const pending = identify(tenant, { userId: 'held', messageId: 'held-1', traits: { a: 1 } });
  await sleep(200);
  // What an erasure that ran meanwhile leaves: a tombstone newer than the call's receipt.
  await holder.query(
    `INSERT INTO privacy_users (environment_id, user_hash, erased_at) VALUES ($1, $2, floor(extract(epoch FROM clock_timestamp()) * 1000)::int8)`,
    [tenant.environmentId, identityHash('held')],
  );
  await holder.query('COMMIT');
  const reply = await pending;
  t.like(reply.json, { success: true, messageId: 'held-1', duplicate: false });
  t.is(await profileOf(tenant, 'held'), null);
  t.is(await count(`SELECT count(*) AS n FROM identify_messages WHERE environment_id = $1::uuid`, tenant.environmentId), 0);
  // A call received after the erasure is new data.
  await identify(tenant, { userId: 'held', messageId: 'held-2', traits: { a: 2 } });
  t.not(await profileOf(tenant, 'held'), null);
});

test.serial('Track events racing an erasure with a worker running: every event of the user left was received after it', async (t) => {
  const tenant = await newTenant(h);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  let sending = true;
  const sender = (async () => {
    let n = 0;
    while (sending) await track(tenant, { userId: 'dora', messageId: `dora-${n++}` });
    return n;
  })();
  await sleep(300);
  const summary = await usersForget(h.operator, [tenant.slug, 'dora']);
  await sleep(300);
  sending = false;
  const sent = await sender;
  await eventually(queueEmpty);
  await sleep(200);
  const left = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, select: { receivedAt: true } });
  t.log(`sent ${sent}, erased ${summary.removed.events}, received after the erasure and kept ${left.length}`);
  t.true(summary.removed.events > 0 || left.length < sent);
  for (const e of left) t.true(e.receivedAt.getTime() > summary.erasedAt);
});

test.serial('in one Identify batch, only the calls a tombstone covers are dropped; the others are applied, and each is answered', async (t) => {
  const tenant = await newTenant(h);
  const received = Date.now();
  await h.db.$executeRawUnsafe(
    `INSERT INTO privacy_users (environment_id, user_hash, erased_at) VALUES ($1::uuid, $2, $3)`,
    tenant.environmentId,
    identityHash('gone'),
    received + 1000,
  );
  const env = { id: tenant.environmentId, features: [] };
  const calls = [
    toIdentifyCall(env, identifyInput('kept-1', { a: 1 }, { messageId: 'b-1' }), received),
    toIdentifyCall(env, identifyInput('gone', { a: 2 }, { messageId: 'b-2' }), received),
    toIdentifyCall(env, identifyInput('kept-2', { a: 3 }, { messageId: 'b-3' }), received),
    // Received after the erasure: new data.
    toIdentifyCall(env, identifyInput('gone', { a: 4 }, { messageId: 'b-4' }), received + 2000),
  ];
  const dropped: string[] = [];
  const outcomes = await applyIdentifyBatch(poolOf(h.db), calls, { onDropped: (d) => dropped.push(...d.map((x) => x.call.messageId)) });
  t.deepEqual(outcomes, ['applied', 'applied', 'applied', 'applied']);
  t.deepEqual(dropped, ['b-2']);
  for (const user of ['kept-1', 'kept-2', 'gone']) t.not(await profileOf(tenant, user), null, user);
  t.is(await count(`SELECT count(*) AS n FROM identify_messages WHERE environment_id = $1::uuid`, tenant.environmentId), 3);
});

test.serial('after a plain erasure the same Track and Identify messageIds are new data: the resend is stored and applied', async (t) => {
  const tenant = await newTenant(h);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  const stored = (messageId: string) =>
    count(`SELECT count(*) AS n FROM events WHERE environment_id = $1::uuid AND message_id = $2`, tenant.environmentId, messageId);
  await track(tenant, { userId: 'fay', messageId: 'fay-t1' });
  await identify(tenant, { userId: 'fay', messageId: 'fay-i1', traits: { a: 1 } });
  await eventually(async () => (await stored('fay-t1')) === 1);
  const summary = await usersForget(h.operator, [tenant.slug, 'fay']);
  t.like(summary.removed, { events: 1, identifyMessages: 1 });
  await sleep(5);
  await track(tenant, { userId: 'fay', messageId: 'fay-t1' });
  await eventually(queueEmpty);
  t.true(await eventually(async () => (await stored('fay-t1')) === 1, { timeoutMs: 5000 }), 'the resend is stored');
  const again = await identify(tenant, { userId: 'fay', messageId: 'fay-i1', traits: { a: 1 } });
  t.is(again.json.duplicate, false);
  t.not(await profileOf(tenant, 'fay'), null);
});

test.serial('an event whose userId has surrounding spaces is the person’s: the erasure removes it with the others', async (t) => {
  const tenant = await newTenant(h);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  await identify(tenant, { userId: 'ex-2', traits: { a: 1 } });
  await track(tenant, { userId: 'ex-2', messageId: 'ex-plain' });
  await track(tenant, { userId: ' ex-2 ', messageId: 'ex-padded' });
  await track(tenant, { userId: '\tex-2\n', messageId: 'ex-tabbed' });
  await track(tenant, { userId: 'ex-22', messageId: 'ex-other' });
  await eventually(async () => (await count(`SELECT count(*) AS n FROM events WHERE environment_id = $1::uuid`, tenant.environmentId)) === 4);
  const summary = await usersForget(h.operator, [tenant.slug, 'ex-2']);
  t.is(summary.removed.events, 3);
  const left = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, select: { messageId: true } });
  t.deepEqual(
    left.map((e) => e.messageId),
    ['ex-other'],
  );
});

test.serial('a consent decision stays only for an address another profile holds now, not one it held once', async (t) => {
  const tenant = await newTenant(h);
  const granted = { channel: 'email', status: 'granted', basis: 'consent', consentedAt: Date.now() - 60_000 };
  const decisions = (address: string) =>
    count(`SELECT count(*) AS n FROM consent_decisions WHERE environment_id = $1::uuid AND address = $2`, tenant.environmentId, address);
  await identify(tenant, { userId: 'ann', timestamp: new Date(Date.now() - 50_000).toISOString(), traits: { email: 'ann@example.com' }, consent: [granted] });
  await identify(tenant, { userId: 'kim', timestamp: new Date(Date.now() - 50_000).toISOString(), traits: { email: 'kim@example.com' }, consent: [granted] });
  // Bea once gave Ann's address and moved on; Lee gives Kim's address now.
  await identify(tenant, { userId: 'bea', timestamp: new Date(Date.now() - 40_000).toISOString(), traits: { email: 'ann@example.com' } });
  await identify(tenant, { userId: 'bea', timestamp: new Date(Date.now() - 30_000).toISOString(), traits: { email: 'bea@example.com' } });
  await identify(tenant, { userId: 'lee', timestamp: new Date(Date.now() - 30_000).toISOString(), traits: { email: 'kim@example.com' } });
  t.is(await decisions('ann@example.com'), 1);
  const ann = await usersForget(h.operator, [tenant.slug, 'ann']);
  t.is(ann.removed.consentDecisions, 1);
  t.is(ann.consentDecisionsKept, 0);
  t.is(await decisions('ann@example.com'), 0);
  const kim = await usersForget(h.operator, [tenant.slug, 'kim']);
  t.is(kim.removed.consentDecisions, 0);
  t.is(kim.consentDecisionsKept, 1);
  t.is(await decisions('kim@example.com'), 1);
});

test.serial('audit records name their environment and hold a keyed hash; suppressing a suppressed user changes nothing and audits nothing', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, { userId: 'gil', traits: { a: 1 } });
  const forgot = await usersForget(h.operator, [tenant.slug, 'gil', '--by', 'dpo']);
  const first = await usersSuppress(h.operator, [tenant.slug, 'gil', '--by', 'dpo']);
  const second = await usersSuppress(h.operator, [tenant.slug, 'gil', '--by', 'dpo']);
  t.true(first.changed);
  t.false(second.changed);
  const audit = await usersAudit(h.operator, [tenant.slug]);
  t.deepEqual(
    audit.map((a) => a.action),
    ['forget', 'suppress'],
  );
  for (const entry of audit) {
    t.is(entry.environment, tenant.slug);
    // Not the plain SHA-256 that anyone holding the ID could compute, but the same for every record of the person.
    t.not(entry.userHash, identityHash('gil').toString('hex'));
    t.is(entry.userHash, forgot.userHash);
  }
  t.is(first.userHash, forgot.userHash);
  // The operator, who holds the secret through the command, finds them again by the ID.
  t.is((await usersAudit(h.operator, [tenant.slug, '--user', ' gil '])).length, 2);
  t.is((await usersAudit(h.operator, [tenant.slug, '--user', 'gill'])).length, 0);
});

test.serial(
  'an erasure racing ~20 joining Identify calls in flight finishes in one go, long before the load stops, and leaves nothing of the person',
  async (t) => {
    const tenant = await newTenant(h, 'join-by-email');
    const email = 'joiner@example.com';
    await identify(tenant, { userId: 'hub', traits: { email, name: 'Hub' } });
    // Enough user IDs joined before the erasure that one lock per user ID would pass PostgreSQL's lock table.
    const env = { id: tenant.environmentId, features: ['join-by-email'] };
    for (let b = 0; b < 20; b++) {
      const calls = Array.from({ length: 200 }, (_, k) => toIdentifyCall(env, identifyInput(`pre-${b}-${k}`, { email }), Date.now()));
      t.true((await applyIdentifyBatch(poolOf(h.db), calls)).every((o) => o === 'applied'));
    }
    const acknowledged: { userId: string; invokedAt: number; answeredAt: number }[] = [];
    let sending = true;
    let next = 0;
    const client = async () => {
      while (sending) {
        const userId = `joiner-${next++}`;
        const invokedAt = Date.now();
        const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, {
          headers: { 'x-api-key': tenant.key },
          body: { userId, traits: { email } },
        }).catch(() => null);
        if (reply?.status === 200) acknowledged.push({ userId, invokedAt, answeredAt: Date.now() });
      }
    };
    const clients = Array.from({ length: 20 }, client);
    await sleep(1500);
    const started = Date.now();
    const erasure = usersForget(h.operator, [tenant.slug, 'hub']).then(
      (summary) => ({ summary, finished: Date.now() }),
      (err: Error) => ({ err, finished: Date.now() }),
    );
    // The load goes on for 3 s after the erasure began, whatever it does.
    await sleep(3000);
    sending = false;
    await Promise.all(clients);
    const outcome = await erasure;
    if ('err' in outcome) return t.fail(`the erasure failed: ${outcome.err.message}`);
    const { summary, finished } = outcome;
    t.log(`erasure took ${finished - started} ms with ${summary.joinedUserIds.length} joined user IDs; ${acknowledged.length} joining calls answered`);
    t.true(finished - started < 2500, `the erasure took ${finished - started} ms: it must not wait for the load to stop`);
    t.true(summary.joinedUserIds.length >= 4000);
    const erased = new Set(summary.joinedUserIds);
    for (const call of acknowledged) {
      // Answered before the erasure began: joined, and erased with the person.
      if (call.answeredAt < started) t.true(erased.has(call.userId), `${call.userId} joined before the erasure`);
      // Sent after it ended: new data, a profile of its own.
      if (call.invokedAt > finished) t.not(await profileOf(tenant, call.userId), null, call.userId);
    }
    for (const userId of ['hub', ...summary.joinedUserIds.slice(0, 50)]) t.is(await profileOf(tenant, userId), null, userId);
    t.is(
      await count(
        `SELECT count(*) AS n FROM profile_users WHERE environment_id = $1::uuid AND user_hash = ANY($2::bytea[])`,
        tenant.environmentId,
        summary.joinedUserIds.map((u) => identityHash(u)),
      ),
      0,
    );
  },
);

test.serial('the erasure removes the person from jobs that failed for good, dead letters and run service events; everyone else’s stay', async (t) => {
  const tenant = await newTenant(h);
  const now = Date.now();
  const queued = (userId: string, messageId: string) => ({
    environmentId: tenant.environmentId,
    messageId,
    receivedAt: now,
    timestampMs: now,
    payload: JSON.stringify({ type: 'track', messageId, event: 'Viewed', userId }),
  });
  // Jobs in the states an erasure looks at, made by a worker of the test's own that fails or completes them.
  const connection = createRedis(h.config, 'worker');
  const settle = async (queue: Queue, outcome: 'fail' | 'complete', add: () => Promise<unknown>) => {
    await add();
    const worker = new Worker(
      queue.name,
      async () => {
        if (outcome === 'fail') throw new Error('refused');
      },
      { connection, prefix: h.config.queuePrefix },
    );
    await eventually(async () => (await queue.getJobCounts('wait', 'active')).wait + (await queue.getJobCounts('active')).active === 0);
    await worker.close();
  };
  const events = h.operator.eventsQueue();
  await settle(events, 'fail', () =>
    events.add('track (3 events)', { events: [queued(' zed ', 'z-1'), queued('other', 'o-1'), queued('zed', 'z-2')] }, { attempts: 1 }),
  );
  await settle(events, 'fail', () => events.add('track (1 event)', { events: [queued('zed', 'z-3')] }, { attempts: 1 }));
  const deadLetters = h.operator.deadLetterQueue();
  await deadLetters.add('dead', { event: queued('zed', 'z-4'), error: 'x' });
  await deadLetters.add('dead', { event: queued('other', 'o-2'), error: 'x' });
  // Service events as the relay makes them: a job `o<id>` per outbox row, kept once run.
  await identify(tenant, { userId: 'zed', traits: { a: 1 } });
  const service = h.operator.serviceEventsQueue();
  const outboxRow = async (userId: string) => {
    const payload = JSON.stringify({ userId, changed: { a: 1 } });
    const [{ id }] = await h.db.$queryRawUnsafe<{ id: bigint }[]>(
      `INSERT INTO outbox_events (environment_id, user_hash, kind, payload, relayed_at) VALUES ($1::uuid, $2, 'profile_fields_changed', $3, now()) RETURNING id`,
      tenant.environmentId,
      userHashOf(userId),
      payload,
    );
    const data = { outboxId: String(id), environmentId: tenant.environmentId, kind: 'profile_fields_changed', createdAt: now, payload };
    return { name: 'change', data, opts: { jobId: `o${id}` } };
  };
  const changes = [await outboxRow('zed'), await outboxRow('other')];
  await settle(service, 'complete', () => service.addBulk(changes));
  t.teardown(async () => {
    await Promise.all([events, deadLetters, service].map((q) => q.obliterate({ force: true }).catch(() => {})));
    connection.disconnect();
  });

  const summary = await usersForget(h.operator, [tenant.slug, 'zed']);
  t.is(summary.queuedJobs, 5);
  // Other tests of the file share these queues: only this tenant's jobs are looked at.
  const mine = <T extends { environmentId: string }>(data: T[]) => data.filter((d) => d.environmentId === tenant.environmentId);
  const failed = await events.getJobs(['failed']);
  t.deepEqual(
    failed.map((j) => mine(j.data.events).map((e) => e.messageId)).filter((ids) => ids.length),
    [['o-1']],
  );
  t.deepEqual(
    mine((await deadLetters.getJobs(['waiting'])).map((j) => j.data.event)).map((e) => e.messageId),
    ['o-2'],
  );
  t.deepEqual(
    mine((await service.getJobs(['completed'])).map((j) => j.data)).map((d) => d.outboxId),
    [changes[1].data.outboxId],
  );
});
