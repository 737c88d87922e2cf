// The relay's wake-up (identify/outbox.ts createOutboxNotify): sent after the Identify
// transaction commits, not inside it (where it held PostgreSQL's database-wide notify lock
// through every commit), and folded while one is in flight or waits for its gap. A LISTEN connection counts them,
// in a database of this file's own: notifications are per database, and other test files'
// Identify calls notify too.
import test from 'ava';
import pg from 'pg';
import { poolOf } from '../../platform/db.ts';
import { createOutboxNotify, OUTBOX_CHANNEL } from '../../identify/outbox.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, ownDatabase, type Harness } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await ownDatabase('outbox_notify') });
  gateway = await gatewayInProcess(h);
});

test.after.always(async () => {
  await gateway?.close();
  await h?.close();
});

/** A LISTEN connection on the outbox channel; `count()` is how many notifications it got, `lastAt()` when the last came. */
async function listener(t: { teardown(fn: () => Promise<void>): void }) {
  const client = new pg.Client({ connectionString: h.config.databaseUrl });
  await client.connect();
  t.teardown(() => client.end());
  let received = 0;
  let lastAt = 0;
  client.on('notification', (n) => {
    if (n.channel !== OUTBOX_CHANNEL) return;
    received++;
    lastAt = Date.now();
  });
  await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
  return { count: () => received, lastAt: () => lastAt };
}

test.serial('calls while a NOTIFY is in flight fold into one more: ten calls, at least one and at most two notifications', async (t) => {
  const listening = await listener(t);
  const notify = createOutboxNotify(poolOf(h.db));
  for (let i = 0; i < 10; i++) notify();
  t.true(await eventually(async () => listening.count() >= 1));
  await sleep(300);
  t.true(listening.count() <= 2, `got ${listening.count()}`);
});

test.serial('NOTIFYs go at most once a gap: calls every 5 ms give one per 100 ms gap, and one after the last call', async (t) => {
  const listening = await listener(t);
  const notify = createOutboxNotify(poolOf(h.db), 100);
  const started = Date.now();
  let lastCall = started;
  for (let i = 0; i < 60; i++) {
    lastCall = Date.now();
    notify();
    await sleep(5);
  }
  await sleep(400);
  const gaps = (lastCall - started) / 100;
  t.true(listening.count() >= 2 && listening.count() <= Math.ceil(gaps) + 1, `got ${listening.count()} over ${gaps} gaps`);
  t.true(listening.lastAt() >= lastCall, 'a call that folded into a later NOTIFY still gets it');
});

test.serial('an Identify that writes an outbox row wakes the relay once it is answered; one that writes none does not', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const listening = await listener(t);
  const identify = (body: Record<string, unknown>) =>
    request(gateway.url, `/api/identify/${tenant.slug}`, { body: { type: 'identify', ...body }, headers: { 'x-api-key': tenant.key } });

  t.is((await identify({ userId: 'u1', messageId: 'n-1', traits: { plan: 'pro' } })).status, 200);
  t.true(await eventually(async () => listening.count() === 1), 'a trait change notifies');

  // A retry of the same call is a duplicate: no outbox row, no notification.
  t.true((await identify({ userId: 'u1', messageId: 'n-1', traits: { plan: 'pro' } })).json.duplicate);
  await sleep(300);
  t.is(listening.count(), 1);
});
