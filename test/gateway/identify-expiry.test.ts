// Identify's messageId records expire after IDENTIFY_IDEMPOTENCY_DAYS (the storage
// maintenance removes them in batches): a retry after that is applied again, and per-trait
// last-writer-wins keeps it harmless, since it carries the first call's timestamp.
import test, { type ExecutionContext } from 'ava';
import { poolOf } from '../../platform/db.ts';
import { removeIdentifyMessages } from '../../events/storage.ts';
import { request } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: Awaited<ReturnType<typeof gatewayInProcess>>;

test.before(async () => {
  h = await openHarness();
  gateway = await gatewayInProcess(h);
});

test.after.always(async () => {
  await gateway?.close();
  await h?.close();
});

async function send(t: ExecutionContext, tenant: Tenant, body: Record<string, unknown>, duplicate: boolean) {
  const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
  t.is(reply.status, 200, reply.text);
  t.deepEqual(reply.json, { success: true, messageId: body.messageId, duplicate });
}

async function plan(tenant: Tenant, userId: string) {
  const reply = await request(gateway.url, `/api/profiles/${tenant.slug}/${userId}`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  return (reply.json as { fields: { plan?: string } }).fields.plan;
}

test('a retry after the idempotency window is applied again and changes nothing newer', async (t) => {
  const tenant = await newTenant(h);
  const first = { userId: 'u1', messageId: `m-${tenant.slug}`, timestamp: '2026-01-01T10:00:00.000Z', traits: { plan: 'a', seats: 1 } };
  await send(t, tenant, first, false);
  await send(t, tenant, { userId: 'u1', messageId: `m2-${tenant.slug}`, timestamp: '2026-01-01T11:00:00.000Z', traits: { plan: 'b' } }, false);
  await send(t, tenant, first, true);

  // Eight days on, with the default window of 7: the records of this environment are past it.
  const pool = poolOf(h.db);
  await pool.query(`UPDATE identify_messages SET created_at = now() - interval '8 days' WHERE environment_id = $1`, [tenant.environmentId]);
  let removed = 0;
  for (let n = -1; n !== 0; removed += n) n = await removeIdentifyMessages(pool, Date.now(), h.config.identifyIdempotencyDays);
  t.true(removed >= 2);
  const left = await pool.query(`SELECT 1 FROM identify_messages WHERE environment_id = $1`, [tenant.environmentId]);
  t.is(left.rowCount, 0);

  // The retry is a new call now (duplicate false); its older timestamp loses to the newer trait.
  await send(t, tenant, first, false);
  t.is(await plan(tenant, 'u1'), 'b');
  // Within the window again: a duplicate.
  await send(t, tenant, first, true);
  t.is(await plan(tenant, 'u1'), 'b');
});
