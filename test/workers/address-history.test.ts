// ADDRESS_HISTORY_DAYS against the real PostgreSQL: the storage maintenance's SQL removes
// exactly the claims history-retention.ts removableClaims names, across its batches; a round removes
// nothing with the setting unset; a worker's pass starts a day after its last; the loop logs
// what it removed; and over HTTP a decision dated after the bound still finds its address
// after the removal, while one dated before it is skipped with the setting and resolved without
// it. A database of the file's own (the removal is global to a database), and its tests run one
// at a time for the same reason.
import { randomUUID } from 'node:crypto';
import test, { type ExecutionContext } from 'ava';
import pg from 'pg';
import { consentGet } from '../../cli/commands/consent.ts';
import { historyRemovalHorizon, removableClaims } from '../../identify/history-retention.ts';
import { DAY_MS } from '../../events/partition-plan.ts';
import { MAINTENANCE_BATCH, removeAddressClaims, type ClaimsCursor } from '../../events/storage.ts';
import { maintenanceRound, newHistoryPass, startStorageMaintenance } from '../../workers/storage-maintenance.ts';
import { request } from '../helpers/http.ts';
import { eventually } from '../helpers/eventually.ts';
import { capturedLogger, gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, ownDatabase, type Harness, type Tenant } from '../helpers/services.ts';

let pool: pg.Pool;
let withBound: Harness;
let unbounded: Harness;
let gatewayWithBound: InProcessGateway;
let gatewayUnbounded: InProcessGateway;

test.before(async () => {
  const url = await ownDatabase('claims');
  pool = new pg.Pool({ connectionString: url, max: 2 });
  withBound = await openHarness({ DATABASE_URL: url, ADDRESS_HISTORY_DAYS: '30' });
  unbounded = await openHarness({ DATABASE_URL: url });
  gatewayWithBound = await gatewayInProcess(withBound);
  gatewayUnbounded = await gatewayInProcess(unbounded);
});
test.after.always(async () => {
  await gatewayWithBound?.close();
  await gatewayUnbounded?.close();
  await withBound?.close();
  await unbounded?.close();
  await pool?.end();
});

const settings = (addressHistoryDays: number | null) => ({
  eventsRetentionDays: null,
  eventPartitionsAheadDays: 3,
  identifyIdempotencyDays: 7,
  addressHistoryDays,
  storageMaintenanceMs: 60_000,
});

interface Row {
  id: string;
  profile: string;
  channel: 'email' | 'sms';
  at: number;
}

/** Profiles with a history each, inserted in a shuffled order (the id is the arrival); returns the profiles. */
async function insertHistories(profiles: number, horizon: number, random: () => number): Promise<string[]> {
  const env = randomUUID();
  const ids = Array.from({ length: profiles }, () => randomUUID());
  await pool.query(`INSERT INTO profiles (id, environment_id, updated_at) SELECT unnest($1::uuid[]), $2, now()`, [ids, env]);
  const rows: [string, string, string, number][] = [];
  for (const id of ids) {
    // Most profiles have a few claims; some many, around the horizon, with equal times.
    const n = Math.floor(random() ** 3 * 24);
    for (let k = 0; k < n; k++) {
      const at = horizon + Math.floor((random() - 0.7) * 10) * DAY_MS + (random() < 0.2 ? 0 : Math.floor(random() * 3));
      rows.push([id, random() < 0.7 ? 'email' : 'sms', `v${k}@example.com`, at]);
    }
  }
  for (let i = rows.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [rows[i], rows[j]] = [rows[j], rows[i]];
  }
  await pool.query(`INSERT INTO address_claims (profile_id, channel, value, at) SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::int8[])`, [
    rows.map((r) => r[0]),
    rows.map((r) => r[1]),
    rows.map((r) => r[2]),
    rows.map((r) => r[3]),
  ]);
  return ids;
}

async function claimsOf(profiles: string[]): Promise<Row[]> {
  const { rows } = await pool.query<{ id: string; profile: string; channel: 'email' | 'sms'; at: string }>(
    `SELECT id::text, profile_id::text AS profile, channel, at::text FROM address_claims WHERE profile_id = ANY($1::uuid[]) ORDER BY id`,
    [profiles],
  );
  return rows.map((r) => ({ ...r, at: Number(r.at) }));
}

/** What removableClaims names, profile by profile (the order of a claim is its id). */
function expectedRemoval(rows: Row[], horizon: number): Set<string> {
  const byProfile = new Map<string, (Row & { order: number })[]>();
  for (const r of rows) {
    const list = byProfile.get(r.profile) ?? [];
    list.push({ ...r, order: Number(r.id) });
    byProfile.set(r.profile, list);
  }
  return new Set([...byProfile.values()].flatMap((claims) => removableClaims(claims, horizon).map((c) => c.id)));
}

/** A small seeded generator: the same history on every run. */
function seeded(seed: number): () => number {
  let s = seed;
  return () => ((s = (s * 1_103_515_245 + 12_345) % 2 ** 31), s / 2 ** 31);
}

test.serial('the removal in SQL removes exactly what removableClaims names, batch after batch', async (t) => {
  const horizon = Date.UTC(2026, 0, 1);
  const profiles = await insertHistories(2000, horizon, seeded(7));
  const before = await claimsOf(profiles);
  const expected = expectedRemoval(before, horizon);
  t.true(before.length > MAINTENANCE_BATCH * 2, `${before.length} claims: the pass takes several batches`);
  t.true(expected.size > 1000 && before.length - expected.size > 1000, `${expected.size} of ${before.length} removable`);
  let removed = 0;
  let batches = 0;
  let after: ClaimsCursor | null = null;
  do {
    const batch = await removeAddressClaims(pool, horizon, after);
    removed += batch.removed;
    after = batch.next;
    batches++;
  } while (after !== null);
  t.true(batches >= 3);
  const left = await claimsOf(profiles);
  t.deepEqual(
    left.map((r) => r.id),
    before.filter((r) => !expected.has(r.id)).map((r) => r.id),
  );
  t.is(removed, expected.size);
  const again = await removeAddressClaims(pool, horizon, null);
  t.is(again.removed, 0, 'a second pass finds nothing more');
});

test.serial('a maintenance round removes nothing with ADDRESS_HISTORY_DAYS unset; with it set, the claims past the bound no decision reads', async (t) => {
  const now = Date.now();
  const horizon = historyRemovalHorizon(now, 30)!;
  const profiles = await insertHistories(200, horizon, seeded(11));
  const before = await claimsOf(profiles);
  const expected = expectedRemoval(before, horizon);
  t.true(expected.size > 50);

  const unset = await maintenanceRound(pool, settings(null), now);
  t.true(unset.ran);
  t.is(unset.addressClaimsRemoved, 0);
  t.is((await claimsOf(profiles)).length, before.length);

  const round = await maintenanceRound(pool, settings(30), now);
  t.true(round.ran);
  t.true(round.addressClaimsRemoved >= expected.size);
  t.deepEqual(
    (await claimsOf(profiles)).map((r) => r.id),
    before.filter((r) => !expected.has(r.id)).map((r) => r.id),
  );
});

test.serial("a worker's pass over the history starts again a day after its last one ended", async (t) => {
  const now = Date.now();
  const horizon = historyRemovalHorizon(now, 30)!;
  const history = newHistoryPass();
  await maintenanceRound(pool, settings(30), now, () => false, history);
  t.is(history.after, null, 'the pass reached the end');
  t.is(history.endedAt, now);
  // All at least a week before the horizon: a day later the same claims are removable.
  const profiles = await insertHistories(50, horizon - 10 * DAY_MS, seeded(13));
  const before = await claimsOf(profiles);
  const expected = expectedRemoval(before, horizon);
  t.true(expected.size > 10);
  t.is((await maintenanceRound(pool, settings(30), now + 3_600_000, () => false, history)).addressClaimsRemoved, 0, 'an hour later: no new pass');
  t.is((await claimsOf(profiles)).length, before.length);
  const next = await maintenanceRound(pool, settings(30), now + DAY_MS, () => false, history);
  t.true(next.addressClaimsRemoved >= expected.size, 'a day later: the next pass');
  t.deepEqual(
    (await claimsOf(profiles)).map((r) => r.id),
    before.filter((r) => !expected.has(r.id)).map((r) => r.id),
  );
});

test.serial("the worker's loop logs what a round removed of the address history", async (t) => {
  const horizon = historyRemovalHorizon(Date.now(), 30)!;
  // A week or more before the horizon: removable whenever the loop's round runs.
  const profiles = await insertHistories(50, horizon - 10 * DAY_MS, seeded(17));
  const expected = expectedRemoval(await claimsOf(profiles), horizon);
  const { log, records } = capturedLogger();
  const loop = startStorageMaintenance({ pool, config: settings(30), log, onFigures: () => {}, onRound: () => {}, clock: { now: Date.now } });
  let logged: Record<string, unknown> | undefined;
  try {
    logged = await eventually(async () => records.find((r) => r.msg === 'storage maintenance' && Number(r.addressClaimsRemoved) > 0));
  } finally {
    await loop.close();
  }
  t.true(Number(logged?.addressClaimsRemoved) >= expected.size, JSON.stringify(logged));
  t.false((await claimsOf(profiles)).some((r) => expected.has(r.id)));
});

// --- over HTTP ---

const iso = (ms: number) => new Date(ms).toISOString();

async function identify(t: ExecutionContext, gateway: InProcessGateway, tenant: Tenant, body: Record<string, unknown>) {
  const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
  t.is(reply.status, 200, reply.text);
}

const grant = (consentedAt: number) => [{ channel: 'email', status: 'granted', consentedAt }];

test.serial(
  'after the removal, a decision dated after the bound finds the address of its time; one dated before is skipped with the setting, resolved without it',
  async (t) => {
    const now = Date.now();
    const days = (n: number) => now - n * DAY_MS;
    const tenant = await newTenant(withBound);
    for (const user of ['after', 'before', 'unset']) {
      await identify(t, gatewayWithBound, tenant, { userId: user, timestamp: iso(days(100)), traits: { email: `${user}-a@example.com` } });
      await identify(t, gatewayWithBound, tenant, { userId: user, timestamp: iso(days(60)), traits: { email: `${user}-b@example.com` } });
      await identify(t, gatewayWithBound, tenant, { userId: user, timestamp: iso(days(10)), traits: { email: `${user}-c@example.com` } });
    }
    const claims = async () =>
      (
        await pool.query<{ value: string }>(
          `SELECT c.value FROM address_claims c JOIN profile_users u ON u.profile_id = c.profile_id WHERE u.environment_id = $1 ORDER BY c.value`,
          [tenant.environmentId],
        )
      ).rows.map((r) => r.value);
    t.is((await claims()).length, 9);

    const round = await maintenanceRound(pool, settings(30), now);
    t.true(round.addressClaimsRemoved >= 3);
    t.deepEqual(await claims(), [
      'after-b@example.com',
      'after-c@example.com',
      'before-b@example.com',
      'before-c@example.com',
      'unset-b@example.com',
      'unset-c@example.com',
    ]);

    const consent = (address: string) => consentGet(withBound.operator, [tenant.slug, 'email', address]);
    const decisions = async () =>
      Number((await pool.query(`SELECT count(*) FROM consent_decisions WHERE environment_id = $1`, [tenant.environmentId])).rows[0].count);

    // 20 days ago: after the bound (30 days); the address then was b@, whose claim is kept.
    await identify(t, gatewayWithBound, tenant, { userId: 'after', traits: {}, consent: grant(days(20)) });
    t.like(await consent('after-b@example.com'), { status: 'granted', decidedAt: days(20) });
    t.is(await decisions(), 1);

    // 45 days ago: before the bound. Skipped with ADDRESS_HISTORY_DAYS (200, nothing stored)…
    await identify(t, gatewayWithBound, tenant, { userId: 'before', traits: {}, consent: grant(days(45)) });
    t.is(await decisions(), 1);
    t.is(await consent('before-b@example.com'), null);
    // …and resolved to the address as of then without it.
    await identify(t, gatewayUnbounded, tenant, { userId: 'unset', traits: {}, consent: grant(days(45)) });
    t.like(await consent('unset-b@example.com'), { status: 'granted', decidedAt: days(45) });
    // The address sent in the call itself applies whatever the decision's time.
    await identify(t, gatewayWithBound, tenant, { userId: 'before', traits: { email: 'before-b@example.com' }, consent: grant(days(45)) });
    t.like(await consent('before-b@example.com'), { status: 'granted', decidedAt: days(45) });
  },
);
