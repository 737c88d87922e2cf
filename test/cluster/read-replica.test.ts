// Profiles from a PostgreSQL streaming replica (DATABASE_READ_URL), against a primary and a
// replica started here: reads go to the replica (with its replay paused, Profiles still answers
// what it held), to the primary once the replica lags more than READ_REPLICA_MAX_LAG_MS, and to
// the primary while the replica is stopped, back to the replica once it is restarted, even while
// the primary writes nothing; Identify writes on the primary throughout, and the lag is a metric.
import test, { type ExecutionContext } from 'ava';
import { poolOf } from '../../platform/db.ts';
import { createLogger } from '../../platform/logger.ts';
import { migrate } from '../../cli/migrate.ts';
import { startGateway, type Gateway } from '../../gateway/server.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { startReplication, type OwnReplication } from '../helpers/pg-replica.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const DB = 'intake_replica_test';
let pgs: OwnReplication;
let h: Harness;
let gateway: Gateway;
let strict: Gateway;
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'silent', 'test-read-replica');

test.before(async () => {
  pgs = await startReplication();
  await migrate(pgs.primaryUrl(DB));
  h = await openHarness({ DATABASE_URL: pgs.primaryUrl(DB), DATABASE_READ_URL: pgs.replicaUrl(DB) });
  gateway = await startGateway({ config: h.config, db: h.db, log });
  // The same, with a lag bound the paused replay passes within seconds.
  strict = await startGateway({ config: { ...h.config, readReplicaMaxLagMs: 1500 }, db: h.db, log });
});

test.after.always(async () => {
  await gateway?.close();
  await strict?.close();
  await h?.close();
  await pgs?.close();
});

const url = (g: Gateway) => `http://127.0.0.1:${g.port}`;

async function identify(tenant: Tenant, messageId: string, plan: string) {
  const reply = await request(url(gateway), `/api/identify/${tenant.slug}`, {
    headers: { 'x-api-key': tenant.key },
    body: { userId: 'u', messageId, traits: { plan } },
  });
  if (reply.status !== 200) throw new Error(`identify: ${reply.status} ${reply.text}`);
}

async function plan(g: Gateway, tenant: Tenant): Promise<unknown> {
  const reply = await request(url(g), `/api/profiles/${tenant.slug}/u`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  if (reply.status !== 200) return `status ${reply.status}`;
  return (JSON.parse(reply.text) as { fields: { plan?: unknown } }).fields.plan;
}

async function metric(g: Gateway, name: string): Promise<number | null> {
  const text = (await request(url(g), '/metrics', { method: 'GET' })).text;
  const line = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return line ? Number(line[1]) : null;
}

async function becomes(t: ExecutionContext, g: Gateway, tenant: Tenant, expected: string, timeoutMs = 15_000) {
  const last = await eventually(async () => ((await plan(g, tenant)) === expected ? expected : null), { timeoutMs, intervalMs: 100 });
  t.is(last, expected);
}

test.serial('reads go to the replica: with its replay paused, Profiles answers what it holds; resumed, the update shows', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, 'm1', 'pro');
  await becomes(t, gateway, tenant, 'pro');
  t.is(await eventually(async () => (await metric(gateway, 'intake_read_replica_in_use')) === 1), true);
  t.true((await metric(gateway, 'intake_read_replica_lag_seconds'))! >= 0);

  await pgs.onReplica('SELECT pg_wal_replay_pause()');
  try {
    await identify(tenant, 'm2', 'enterprise');
    // The primary has it; the replica's paused replay does not, and reads stay on the replica.
    for (let i = 0; i < 5; i++) t.is(await plan(gateway, tenant), 'pro');
  } finally {
    await pgs.onReplica('SELECT pg_wal_replay_resume()');
  }
  await becomes(t, gateway, tenant, 'enterprise');
});

test.serial('a replica lagging more than READ_REPLICA_MAX_LAG_MS: reads go to the primary, and back once it catches up', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, 'l1', 'pro');
  await becomes(t, strict, tenant, 'pro');
  await pgs.onReplica('SELECT pg_wal_replay_pause()');
  try {
    const written = Date.now();
    await identify(tenant, 'l2', 'enterprise');
    await becomes(t, strict, tenant, 'enterprise', 10_000);
    t.is(await metric(strict, 'intake_read_replica_in_use'), 0);
    // It lacks l2: it trails by the time since then, give or take the second between two readings.
    const lag = (await metric(strict, 'intake_read_replica_lag_seconds'))!;
    t.true(lag > 1.5 && lag < (Date.now() - written) / 1000 + 3, `${lag} s`);
  } finally {
    await pgs.onReplica('SELECT pg_wal_replay_resume()');
  }
  t.is(await eventually(async () => (await metric(strict, 'intake_read_replica_in_use')) === 1), true);
});

test.serial('the replica stopped: Profiles answers from the primary (every answer 200), and goes back once it is up', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, 's1', 'pro');
  await becomes(t, gateway, tenant, 'pro');
  await pgs.stopReplica();
  try {
    await identify(tenant, 's2', 'enterprise');
    for (let i = 0; i < 5; i++) t.is(await plan(gateway, tenant), 'enterprise');
    t.is(await eventually(async () => (await metric(gateway, 'intake_read_replica_in_use')) === 0), true);
  } finally {
    await pgs.startReplica();
  }
  t.is(await eventually(async () => (await metric(gateway, 'intake_read_replica_in_use')) === 1), true);
  await becomes(t, gateway, tenant, 'enterprise');
});

/** The primary's WAL write position. */
async function primaryLsn(): Promise<string> {
  return (await poolOf(h.db).query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
}

/**
 * Waits until the primary has written no WAL for `ms`. After a write PostgreSQL logs one more
 * record of its own (a standby snapshot, within 15 s); past that, an idle primary writes nothing.
 */
async function primaryIdleFor(ms: number, timeoutMs = 90_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let last = await primaryLsn();
  let since = Date.now();
  while (Date.now() - since < ms) {
    if (Date.now() > deadline) throw new Error(`the primary kept writing WAL (at ${last})`);
    await sleep(500);
    const now = await primaryLsn();
    if (now !== last) [last, since] = [now, Date.now()];
  }
  return last;
}

test.serial('the replica restarted while the primary writes nothing: reads go back to it within seconds, its lag 0', async (t) => {
  const tenant = await newTenant(h);
  await identify(tenant, 'i1', 'pro');
  await becomes(t, strict, tenant, 'pro');
  const idleAt = await primaryIdleFor(16_000);
  await pgs.stopReplica();
  try {
    // Both gateways have seen it down (no lag to show): what they show next is read from the restarted replica.
    const down = async (g: Gateway) => (await metric(g, 'intake_read_replica_in_use')) === 0 && (await metric(g, 'intake_read_replica_lag_seconds')) === null;
    t.true(await eventually(async () => (await down(strict)) && (await down(gateway))));
  } finally {
    await pgs.startReplica();
  }
  // Both gateways, the strict one included (1.5 s): a replica that holds everything the primary
  // has trails it by nothing, however long ago the primary last wrote.
  const back = await eventually(
    async () =>
      (await metric(strict, 'intake_read_replica_in_use')) === 1 &&
      (await metric(gateway, 'intake_read_replica_in_use')) === 1 &&
      (await metric(strict, 'intake_read_replica_lag_seconds')) === 0 &&
      (await metric(gateway, 'intake_read_replica_lag_seconds')) === 0,
    { timeoutMs: 10_000, intervalMs: 200 },
  );
  t.true(back, `in use ${await metric(strict, 'intake_read_replica_in_use')}, lag ${await metric(gateway, 'intake_read_replica_lag_seconds')} s`);
  for (let i = 0; i < 3; i++) t.is(await plan(strict, tenant), 'pro');
  // Everything above happened on an idle primary (had it written, the replica would have had something new to stream).
  t.is(await primaryLsn(), idleAt);
});
