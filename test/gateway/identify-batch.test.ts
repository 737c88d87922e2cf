// Identify's group commit at the store: a batch is one transaction applying its calls in
// arrival order; duplicates and conflicting reuse inside one batch; every kind of call
// (traits only, consent only, join by email) on the one path; a call the database refuses at
// apply time fails alone, in a batch of 50 and through the gateway; a batch is two round trips,
// one when its profiles are cached, and a stale cache or a used messageId falls back to the
// locked path's answers.
import { randomBytes } from 'node:crypto';
import test from 'ava';
import { createDb, poolOf } from '../../platform/db.ts';
import { applyIdentifyBatch } from '../../identify/identify-batch.ts';
import { messageKeyOf } from '../../identify/identify-write.ts';
import { toIdentifyCall, type IdentifyCall } from '../../identify/identify-plan.ts';
import { PROBE_EVERY } from '../../identify/cache-gate.ts';
import { ProfileCache } from '../../identify/profile-cache.ts';
import type { ConsentDecisionInput, IdentifyInput } from '../../identify/validation.ts';
import { request } from '../helpers/http.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, ownDatabase, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
// A marker trait value the database refuses (a trigger of this file's own database raises on it).
const POISON = `poison-${randomBytes(6).toString('hex')}`;

test.before(async () => {
  // Its own database: the trigger below must not touch other files' profiles.
  const url = await ownDatabase('identify_batch');
  h = await openHarness({ DATABASE_URL: url });
  await poolOf(h.db).query(`
    CREATE OR REPLACE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.fields LIKE '%${POISON}%' THEN RAISE EXCEPTION 'refused by test trigger'; END IF;
      RETURN NEW;
    END $$;
    DROP TRIGGER IF EXISTS refuse_poison ON profiles;
    CREATE TRIGGER refuse_poison BEFORE INSERT OR UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION refuse_poison();`);
});
test.after.always(() => h?.close());

const BASE = Date.parse('2024-05-01T10:00:00.000Z');

const input = identifyInput;

function call(tenant: Tenant, i: IdentifyInput, features: string[] = []): IdentifyCall {
  return toIdentifyCall({ id: tenant.environmentId, features }, i, Date.now());
}

function grant(channel: 'email' | 'sms', consentedAt: number | null): ConsentDecisionInput {
  return { channel, status: 'granted', purpose: 'marketing', basis: 'consent', source: 'api', consentedAt, proofRef: null, expiresAt: null };
}

async function profileOf(tenant: Tenant, userId: string) {
  const { rows } = await poolOf(h.db).query(
    `SELECT p.id, p.fields, p.trait_times, p.updated_at, p.xmin::text AS xmin FROM profile_users u JOIN profiles p ON p.id = u.profile_id
     WHERE u.environment_id = $1 AND u.user_id = $2`,
    [tenant.environmentId, userId],
  );
  const r = rows[0];
  return (
    r && {
      id: r.id as string,
      fields: JSON.parse(r.fields),
      times: JSON.parse(r.trait_times),
      updatedAt: (r.updated_at as Date).getTime(),
      xmin: r.xmin as string,
    }
  );
}

test('calls for one user inside one batch apply in arrival order; on equal times the later arrival wins', async (t) => {
  const tenant = await newTenant(h);
  const at = (ms: number) => ({ timestampMs: ms, timestamp: new Date(ms).toISOString() });
  const calls = [
    call(tenant, input('u1', { a: 'first', b: 1 }, at(BASE + 2000))),
    call(tenant, input('u1', { a: 'older', c: true }, at(BASE + 1000))),
    call(tenant, input('u1', { a: 'tie-later', b: 2 }, at(BASE + 2000))),
    call(tenant, input('u2', { a: 'other user' }, at(BASE))),
    call(tenant, input('u1', { b: null }, at(BASE + 2000))),
  ];
  t.deepEqual(await applyIdentifyBatch(poolOf(h.db), calls), ['applied', 'applied', 'applied', 'applied', 'applied']);
  const p = await profileOf(tenant, 'u1');
  t.deepEqual(p.fields, { a: 'tie-later', b: null, c: true });
  t.deepEqual(p.times, { a: BASE + 2000, b: BASE + 2000, c: BASE + 1000 });
  t.is(p.updatedAt, BASE + 2000);
  // One transaction wrote both users' profiles.
  t.is((await profileOf(tenant, 'u2')).xmin, p.xmin);
});

test('duplicate retry and conflicting reuse of a messageId inside one batch', async (t) => {
  const tenant = await newTenant(h);
  const same = input('u1', { plan: 'pro' }, { messageId: 'm-1' });
  const calls = [
    call(tenant, same),
    call(tenant, { ...same, consent: [grant('email', BASE)] }),
    call(tenant, input('u1', { plan: 'free' }, { messageId: 'm-1' })),
    call(tenant, input('u2', { plan: 'pro' }, { messageId: 'm-1' })),
  ];
  t.deepEqual(await applyIdentifyBatch(poolOf(h.db), calls), ['applied', 'duplicate', 'conflict', 'conflict']);
  t.deepEqual((await profileOf(tenant, 'u1')).fields, { plan: 'pro' });
  t.is(await profileOf(tenant, 'u2'), undefined, 'a conflicting call creates nothing');
  // Later batches weigh the stored claim the same way.
  t.deepEqual(await applyIdentifyBatch(poolOf(h.db), [call(tenant, same), call(tenant, input('u1', { plan: 'x' }, { messageId: 'm-1' }))]), [
    'duplicate',
    'conflict',
  ]);
});

test('a traits-only, a consent-only and a join-by-email call take one path: one batch, one transaction', async (t) => {
  const tenant = await newTenant(h, 'join-by-email,attribute-trigger');
  const features = ['join-by-email', 'attribute-trigger'];
  await applyIdentifyBatch(poolOf(h.db), [call(tenant, input('owner', { email: 'shared@example.com' }), features)]);
  const calls = [
    call(tenant, input('plain', { plan: 'pro' }), features),
    // Decided at the call's time: the address is the stored email as of then.
    call(tenant, input('owner', {}, { consent: [grant('email', null)] }), features),
    call(tenant, input('joiner', { email: 'Shared@Example.com', name: 'J' }), features),
  ];
  t.deepEqual(await applyIdentifyBatch(poolOf(h.db), calls), ['applied', 'applied', 'applied']);
  const plain = await profileOf(tenant, 'plain');
  const owner = await profileOf(tenant, 'owner');
  const joiner = await profileOf(tenant, 'joiner');
  t.is(joiner.id, owner.id, 'joined by email');
  t.deepEqual(owner.fields, { email: 'Shared@Example.com', name: 'J' });
  const { rows } = await poolOf(h.db).query(`SELECT status, xmin::text AS xmin FROM consent_decisions WHERE environment_id = $1`, [tenant.environmentId]);
  t.is(rows.length, 1);
  t.is(rows[0].status, 'granted');
  const outbox = await poolOf(h.db).query(`SELECT kind, xmin::text AS xmin FROM outbox_events WHERE environment_id = $1 ORDER BY id`, [tenant.environmentId]);
  // The three calls' rows (after the seed's outbox row) were written by one transaction.
  t.is(plain.xmin, owner.xmin);
  t.is(rows[0].xmin, plain.xmin);
  t.deepEqual(
    outbox.rows.slice(1).map((r) => [r.kind, r.xmin]),
    [
      ['profile_fields_changed', plain.xmin],
      ['subscription_changed', plain.xmin],
      ['profile_fields_changed', plain.xmin],
    ],
  );
});

test('one call the database refuses inside a batch of 50 fails alone; the other 49 are applied', async (t) => {
  const tenant = await newTenant(h);
  const calls = Array.from({ length: 50 }, (_, i) => call(tenant, input(`user-${i}`, { n: i, mark: i === 17 ? POISON : 'ok' })));
  const outcomes = await applyIdentifyBatch(poolOf(h.db), calls);
  t.true(outcomes[17] instanceof Error);
  t.regex(String((outcomes[17] as Error).message), /refused by test trigger/);
  outcomes.forEach((o, i) => i !== 17 && t.is(o, 'applied', `call ${i}`));
  for (let i = 0; i < 50; i++) t.is((await profileOf(tenant, `user-${i}`))?.fields.n, i === 17 ? undefined : i);
  // Its messageId was not kept: a corrected retry of it is applied.
  const retry = call(tenant, input('user-17', { n: 17, mark: 'ok' }, { messageId: calls[17].messageId }));
  t.deepEqual(await applyIdentifyBatch(poolOf(h.db), [retry]), ['applied']);
});

test('through the gateway: 50 calls at once, one refused: it answers 500 alone, the other 49 answer 200', async (t) => {
  const tenant = await newTenant(h);
  const gateway = await gatewayInProcess(h, { ownPool: true });
  t.teardown(() => gateway.close());
  const replies = await Promise.all(
    Array.from({ length: 50 }, (_, i) =>
      request(gateway.url, `/api/identify/${tenant.slug}`, {
        headers: { 'x-api-key': tenant.key },
        body: { userId: `g-${i}`, traits: { n: i, mark: i === 31 ? POISON : 'ok' } },
      }),
    ),
  );
  replies.forEach((r, i) => t.is(r.status, i === 31 ? 500 : 200, `call ${i}: ${r.text}`));
  t.deepEqual(replies[31].json, { error: 'Internal error' });
});

test('a batch is two round trips (BEGIN, locks and claim; write and COMMIT), three with consent', async (t) => {
  const tenant = await newTenant(h);
  const target = new URL(poolOf(h.db).options.connectionString!);
  const relay = await startProxy(target.toString());
  const db = createDb({ databaseUrl: relay.url(target.toString()), databasePoolSize: 1 });
  try {
    const pool = poolOf(db);
    await pool.query('SELECT 1'); // the connection's start-up is not the batch's
    const batch = (n: number, extra: Partial<IdentifyInput> = {}) =>
      Array.from({ length: n }, (_, i) => call(tenant, input(`rt-${i}`, { n: i, email: `rt-${i}@example.com` }, extra)));
    relay.resetRoundTrips();
    t.deepEqual(await applyIdentifyBatch(pool, batch(20)), Array(20).fill('applied'));
    t.is(relay.roundTrips(), 2);
    relay.resetRoundTrips();
    t.deepEqual(await applyIdentifyBatch(pool, batch(20, { consent: [grant('email', BASE)] })), Array(20).fill('applied'));
    t.is(relay.roundTrips(), 3, 'the decisions are locked and read in one more');
    t.is((await profileOf(tenant, 'rt-3')).fields.n, 3);
  } finally {
    // The pool itself: Prisma's $disconnect leaves a pool it never used open (until its idle timeout).
    await poolOf(db).end();
    await relay.close();
  }
});

test('a write PostgreSQL refuses rolls back the COMMIT sent behind it: nothing of the batch is kept', async (t) => {
  const tenant = await newTenant(h);
  const calls = [call(tenant, input('rb-ok', { n: 1 })), call(tenant, input('rb-poison', { mark: POISON }))];
  // Both in one batch: the write fails, the batch is split, and only the refused call fails.
  const outcomes = await applyIdentifyBatch(poolOf(h.db), calls, { attempts: 1 });
  t.is(outcomes[0], 'applied');
  t.true(outcomes[1] instanceof Error);
  t.is(await profileOf(tenant, 'rb-poison'), undefined);
  const claims = await poolOf(h.db).query('SELECT message_key FROM identify_messages WHERE environment_id = $1', [tenant.environmentId]);
  t.deepEqual(
    claims.rows.map((r) => r.message_key),
    [messageKeyOf(calls[0].messageKey)],
    "the refused call's claim was rolled back with its write",
  );
});

/** A pool of one connection through a relay that counts round trips. */
async function countedPool(t: { teardown(fn: () => Promise<void>): void }) {
  const target = new URL(poolOf(h.db).options.connectionString!);
  const relay = await startProxy(target.toString());
  const db = createDb({ databaseUrl: relay.url(target.toString()), databasePoolSize: 1 });
  t.teardown(async () => {
    await poolOf(db).end();
    await relay.close();
  });
  await poolOf(db).query('SELECT 1');
  return { pool: poolOf(db), relay };
}

test('a batch of cached profiles is one round trip; one whose row changed since takes the locked path and merges over what is stored', async (t) => {
  const tenant = await newTenant(h);
  const { pool, relay } = await countedPool(t);
  const cache = new ProfileCache(1_000_000);
  const batch = (round: number) => Array.from({ length: 20 }, (_, i) => call(tenant, input(`cp-${i}`, { round, email: `cp-${i}@example.com` })));
  relay.resetRoundTrips();
  t.deepEqual(await applyIdentifyBatch(pool, batch(1), { cache }), Array(20).fill('applied'));
  t.is(relay.roundTrips(), 2, 'new users: the locked path');
  relay.resetRoundTrips();
  t.deepEqual(await applyIdentifyBatch(pool, batch(2), { cache }), Array(20).fill('applied'));
  t.is(relay.roundTrips(), 1, 'every profile cached: one round trip');
  t.is((await profileOf(tenant, 'cp-7')).fields.round, 2);

  // Another writer changes one profile behind the cache's back.
  const before = await profileOf(tenant, 'cp-3');
  await poolOf(h.db).query(`UPDATE profiles SET fields = $2, trait_times = $3 WHERE id = $1`, [
    before.id,
    JSON.stringify({ ...before.fields, other: 'writer' }),
    JSON.stringify({ ...before.times, other: 1 }),
  ]);
  relay.resetRoundTrips();
  t.deepEqual(await applyIdentifyBatch(pool, batch(3), { cache }), Array(20).fill('applied'));
  t.is(relay.roundTrips(), 3, 'the cached write failed as a whole, then the locked path');
  t.like((await profileOf(tenant, 'cp-3')).fields, { round: 3, other: 'writer' });
  t.is((await profileOf(tenant, 'cp-4')).fields.round, 3);
  const claims = await poolOf(h.db).query('SELECT count(*)::int AS n FROM identify_messages WHERE environment_id = $1', [tenant.environmentId]);
  t.is(claims.rows[0].n, 60, 'the failed cached write left no claim behind');

  relay.resetRoundTrips();
  t.deepEqual(await applyIdentifyBatch(pool, batch(4), { cache }), Array(20).fill('applied'));
  t.is(relay.roundTrips(), 1, 'the locked path refreshed the cache');
});

test('a cache another writer keeps making stale is tried one batch in PROBE_EVERY, and again in every batch once it is current', async (t) => {
  const tenant = await newTenant(h);
  const { pool, relay } = await countedPool(t);
  const cache = new ProfileCache(1_000_000);
  let round = 0;
  /** A batch over the same 10 users; the round trips it took. */
  const apply = async () => {
    round++;
    const calls = Array.from({ length: 10 }, (_, i) => call(tenant, input(`gate-${i}`, { round })));
    relay.resetRoundTrips();
    t.deepEqual(await applyIdentifyBatch(pool, calls, { cache }), Array(10).fill('applied'));
    return relay.roundTrips();
  };
  // As another gateway would: a write to one of the batch's profiles behind this cache's back.
  const otherWriter = () => poolOf(h.db).query(`UPDATE profiles SET email = NULL WHERE id = $1`, [userProfileId]);
  t.is(await apply(), 2, 'new users: the locked path');
  const userProfileId = (await profileOf(tenant, 'gate-0')).id;

  const stale: number[] = [];
  for (let i = 0; i < 3 * PROBE_EVERY; i++) {
    await otherWriter();
    stale.push(await apply());
  }
  t.is(stale[0], 3, 'a stale cache: the cached write, then the locked path');
  const closedFrom = stale.indexOf(2);
  t.true(closedFrom > 0 && closedFrom <= 5, `straight to the locked path from batch ${closedFrom}`);
  const tried = stale.slice(closedFrom).filter((n) => n === 3).length;
  t.true(tried >= 1 && tried <= 3, `${tried} probes in ${stale.length - closedFrom} batches`);

  // The other writer stops: the next probe succeeds, and every batch takes the one round trip again.
  const after: number[] = [];
  for (let i = 0; i < PROBE_EVERY + 5; i++) after.push(await apply());
  const reopened = after.indexOf(1);
  t.true(reopened >= 0 && reopened < PROBE_EVERY, `a probe succeeded at batch ${reopened}`);
  t.deepEqual(after.slice(reopened), Array(after.length - reopened).fill(1));
  t.is((await profileOf(tenant, 'gate-9')).fields.round, round);
});

test('a cached batch with messageIds already used answers duplicate and conflict as the locked path does', async (t) => {
  const tenant = await newTenant(h);
  const cache = new ProfileCache(1_000_000);
  const pool = poolOf(h.db);
  const first = call(tenant, input('dup-a', { n: 1 }, { messageId: 'm-dup-1' }));
  t.deepEqual(await applyIdentifyBatch(pool, [first, call(tenant, input('dup-b', { n: 1 }))], { cache }), ['applied', 'applied']);
  const retry = call(tenant, input('dup-a', { n: 1 }, { messageId: 'm-dup-1' }));
  const reuse = call(tenant, input('dup-b', { n: 2 }, { messageId: 'm-dup-1' }));
  const fresh = call(tenant, input('dup-b', { n: 3 }));
  t.not(cache.snapshotFor([retry, reuse, fresh]), null, 'both users are cached');
  t.deepEqual(await applyIdentifyBatch(pool, [retry, reuse, fresh], { cache }), ['duplicate', 'conflict', 'applied']);
  t.is((await profileOf(tenant, 'dup-b')).fields.n, 3);
  t.is((await profileOf(tenant, 'dup-a')).fields.n, 1);
});
