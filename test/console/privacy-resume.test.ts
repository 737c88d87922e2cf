// Privacy requests survive the dashboard that took them: `intake dashboard` processes beside a
// real gateway and worker on the same PostgreSQL and Redis. A forget request held by a lock of
// the test (the environment's lock, taken shared as a worker's batch takes it while it stores
// events) is running when its dashboard is SIGKILLed; once its lease ends another dashboard
// claims it and runs it again: it succeeds and the person is gone. A request whose every run
// fails (a trigger of the test refuses the erasure's tombstones) is run PRIVACY_ATTEMPTS times,
// then fails with the error. Two dashboards claiming at once never claim one request both.
import test from 'ava';
import { addOperator, createToken } from '../../gateway/console/operators.ts';
import { claimExpired, PRIVACY_ATTEMPTS } from '../../gateway/console/privacy-leases.ts';
import { poolOf } from '../../platform/db.ts';
import { environmentLock, LOCK_SHARED_SQL, lockParam } from '../../profiles/person.ts';
import type { Workers } from '../../workers/main.ts';
import { call, consoleDatabase, logInAs } from '../helpers/console.ts';
import { eventually } from '../helpers/eventually.ts';
import { acceptedTrack, appliedIdentify, request } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake, workerInProcess, type Child, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant, closeEmptied } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
const V1 = '/admin/api/v1';
const LEASE_MS = 2000;
let h: Harness;
let gateway: InProcessGateway;
let worker: Workers;
let tenant: Tenant;
let admin: Record<string, string>;
const children: Child[] = [];

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await consoleDatabase('privacy_resume'), WORKER_BATCH_WAIT_MS: '2', PRIVACY_REQUEST_LEASE_MS: String(LEASE_MS) });
  gateway = await gatewayInProcess(h);
  worker = await workerInProcess(h);
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  admin = { authorization: `Bearer ${(await createToken(h.db, 'ada')).token}` };
  tenant = await newTenant(h);
});
test.after.always(async () => {
  await Promise.all(children.map((c) => c.kill('SIGKILL')));
  await poolOf(h.db)
    .query('DROP TRIGGER IF EXISTS test_refuse_erasure ON privacy_users')
    .catch(() => {});
  await worker?.close();
  await gateway?.close();
  await closeEmptied(h);
});

async function dashboard(): Promise<Child> {
  const child = await spawnIntake('dashboard', { ...h.env, DASHBOARD_PORT: '0' });
  children.push(child);
  return child;
}

const requests = () => `${V1}/organizations/${tenant.slug}/environments/${tenant.slug}/privacy-requests`;
const row = (id: string) => h.db.privacyRequest.findUniqueOrThrow({ where: { id } });
const eventsOf = (userId: string) => h.db.event.count({ where: { environmentId: tenant.environmentId, userId } });

test.serial('two dashboards claiming at once never claim the same request', async (t) => {
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const made = await h.db.privacyRequest.create({
      data: { environmentId: tenant.environmentId, action: 'suppress', operator: 'ada', userHash: '0'.repeat(64), userId: `u${i}` },
    });
    ids.push(made.id);
  }
  const claims = await Promise.all(Array.from({ length: 8 }, (_, i) => claimExpired(h.db, `owner-${i % 2}`, 60_000, 3)));
  const claimed = claims.flat().map((r) => r.id);
  t.is(new Set(claimed).size, claimed.length, 'no request claimed twice');
  t.true(claimed.every((id) => ids.includes(id)));
  for (const r of claims.flat()) t.is(r.attempts, 1);
  // Claimed and leased: nobody takes them again until the lease ends.
  t.deepEqual(
    (await claimExpired(h.db, 'owner-2', 60_000, 100)).map((r) => r.id).filter((id) => claimed.includes(id)),
    [],
  );
  await h.db.privacyRequest.deleteMany({ where: { id: { in: ids } } });
});

test.serial('a forget request whose dashboard is killed while it runs is run again by another: it succeeds and the person is gone', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'ada-lovelace', traits: { email: 'ada@example.com', name: 'Ada' } });
  for (let i = 0; i < 3; i++) await acceptedTrack(gateway.url, tenant, { userId: 'ada-lovelace', event: 'Viewed' });
  t.true(await eventually(async () => (await eventsOf('ada-lovelace')) === 3));

  // The environment's lock, held shared as a worker storing a batch holds it: the erasure waits for it.
  const holder = await poolOf(h.db).connect();
  let held = true;
  try {
    await holder.query('BEGIN');
    await holder.query(LOCK_SHARED_SQL, [lockParam([environmentLock(tenant.environmentId)])]);

    const first = await dashboard();
    const submitted = await call(first.url, requests(), { method: 'POST', headers: admin, body: { action: 'forget', userId: 'ada-lovelace' } });
    t.is(submitted.status, 202, submitted.text);
    const id: string = submitted.json.id;
    // Running, its erasure waiting for the lock.
    t.true(
      await eventually(async () => {
        const waiting = await poolOf(h.db).query(
          `SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%pg_advisory_xact_lock(%'`,
        );
        return (await row(id)).status === 'running' && Boolean(waiting.rowCount);
      }),
    );
    t.regex((await row(id)).leaseOwner ?? '', new RegExp(`:${first.process.pid}:`));

    await first.kill('SIGKILL');
    await holder.query('COMMIT');
    held = false;
    t.like(await row(id), { status: 'running', attempts: 1 }, 'left running by the killed dashboard');

    const second = await dashboard();
    const done = await eventually(
      async () => {
        const res = await call(second.url, `${V1}/privacy-requests/${id}`, { headers: admin });
        return ['succeeded', 'failed'].includes(res.json?.status) ? res.json : null;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    t.like(done, { status: 'succeeded', attempts: 2, error: null });
    t.like(done.result, { removed: { profiles: 1, events: 3 } });
    const profile = await request(gateway.url, `/api/profiles/${tenant.slug}/ada-lovelace`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
    t.is(profile.status, 404);
    t.is(await eventsOf('ada-lovelace'), 0);
    // The request's page in the console says it took two runs.
    const session = await logInAs(second.url, 'ada', PASSWORD);
    const page = await call(second.url, `/console/privacy-requests/${id}`, { headers: { accept: 'text/html', cookie: session.cookie } });
    t.is(page.status, 200);
    t.true(page.text.includes('<dt>runs</dt><dd>2</dd>'), page.text);
    // Ended: the raw user ID and the lease are gone from the row.
    t.like(await row(id), { userId: null, leaseOwner: null, leaseUntil: null });
  } finally {
    if (held) await holder.query('ROLLBACK').catch(() => {});
    holder.release();
  }
});

test.serial('a request whose every run fails is run a bounded number of times, then fails with the error', async (t) => {
  const pool = poolOf(h.db);
  await pool.query(`CREATE OR REPLACE FUNCTION test_refuse_erasure() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'erasures are refused by the test'; END $$`);
  await pool.query('CREATE TRIGGER test_refuse_erasure BEFORE INSERT OR UPDATE ON privacy_users FOR EACH ROW EXECUTE FUNCTION test_refuse_erasure()');
  try {
    const board = children.find((c) => c.process.exitCode === null && c.process.signalCode === null) ?? (await dashboard());
    const submitted = await call(board.url, requests(), { method: 'POST', headers: admin, body: { action: 'forget', userId: 'grace' } });
    t.is(submitted.status, 202, submitted.text);
    const id: string = submitted.json.id;
    // Between runs it is open again, with the failed run's error.
    const retried = await eventually(async () => {
      const r = await row(id);
      return r.status === 'pending' && r.attempts === 1 ? r : null;
    });
    t.regex(retried?.error ?? '', /erasures are refused by the test/);
    const done = await eventually(
      async () => {
        const r = await row(id);
        return r.status === 'failed' ? r : null;
      },
      { timeoutMs: 60_000, intervalMs: 250 },
    );
    t.like(done, { attempts: PRIVACY_ATTEMPTS, userId: null, leaseOwner: null });
    t.regex(done?.error ?? '', /erasures are refused by the test/);
  } finally {
    await pool.query('DROP TRIGGER IF EXISTS test_refuse_erasure ON privacy_users');
  }
});
