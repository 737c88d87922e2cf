// A gateway process SIGKILLed under concurrent Track load: every request it answered 202 is
// stored exactly once (the 202 came only after the job was in Redis, so the gateway's death
// cannot take it back), and the requests cut off in flight are "not confirmed": some may have
// landed, and the client's retry with the same messageId on another gateway never doubles them.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import test from 'ava';
import { eventually } from '../helpers/eventually.ts';
import { postTrack, request, trackBody } from '../helpers/http.ts';
import { harnessWithProcesses, spawnIntake, type Child } from '../helpers/processes.ts';
import { newTenant, type Harness } from '../helpers/services.ts';

let h: Harness;
let children: Child[];

harnessWithProcesses(test, (...opened) => ([h, children] = opened), { emptied: true });

const CLIENTS = 64;
/** Accepted events before the kill: enough that group commit is batching several requests at once. */
const BEFORE_KILL = 500;

test('a gateway killed with SIGKILL mid-load: every 202 is stored exactly once, cut-off requests retried are not doubled', async (t) => {
  const tenant = await newTenant(h);
  const run = randomBytes(4).toString('hex');
  const worker = await spawnIntake('worker', h.env);
  children.push(worker);
  const gateway = await spawnIntake('gateway', h.env);
  children.push(gateway);

  const accepted: string[] = [];
  const inDoubt: Record<string, unknown>[] = [];
  const unexpected: string[] = [];
  let killed = false;

  // node:http with a keep-alive agent rather than fetch: the client must be cheap enough that
  // the gateway, not this process, is the bottleneck, or the kill finds nothing in flight.
  const agent = new http.Agent({ keepAlive: true, maxSockets: CLIENTS });
  t.teardown(() => agent.destroy());
  const post = (body: Record<string, unknown>) => postTrack(agent, gateway.url, tenant, body);

  // Each client sends its next event as soon as the last one is answered, so at any moment
  // about CLIENTS requests are somewhere between the socket and Redis.
  const client = async (c: number) => {
    for (let i = 0; !killed; i++) {
      const body = trackBody({ messageId: `gk-${run}-${c}-${i}`, event: 'Gateway Kill', userId: `u-${c}`, properties: { c, i } });
      try {
        const reply = await post(body);
        if (reply.status === 202 && reply.text === JSON.stringify({ message_id: body.messageId, status: 'accepted' })) accepted.push(body.messageId as string);
        else unexpected.push(`${reply.status} ${reply.text}`);
      } catch {
        // No answer: the connection died with the gateway. Whether the event landed is unknown.
        inDoubt.push(body);
      }
    }
  };
  const clients = Array.from({ length: CLIENTS }, (_, c) => client(c));

  const loaded = await eventually(async () => accepted.length >= BEFORE_KILL || unexpected.length > 0, { timeoutMs: 40_000, intervalMs: 5 });
  t.true(loaded, `${accepted.length} accepted before the kill`);
  gateway.process.kill('SIGKILL');
  // Clients keep sending until the process is gone, so requests are in flight at its death.
  t.is(await gateway.exited, 'SIGKILL');
  killed = true;
  await Promise.all(clients);

  t.deepEqual(unexpected, [], 'every answer the gateway gave was a 202');
  t.true(accepted.length >= BEFORE_KILL);
  t.true(inDoubt.length > 0, 'the kill cut requests in flight');
  t.log(`${accepted.length} accepted, ${inDoubt.length} cut off in flight`);

  const env = tenant.environmentId;
  const queue = h.operator.eventsQueue();
  const drained = () =>
    eventually(
      async () => {
        const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused');
        return Object.values(c).every((n) => n === 0);
      },
      { timeoutMs: 30_000, intervalMs: 200 },
    );
  const rowsPerId = async () => {
    const groups = await h.db.event.groupBy({ by: ['messageId'], where: { environmentId: env }, _count: { _all: true } });
    return new Map(groups.map((g) => [g.messageId, g._count._all]));
  };

  // Before any retry: every 202'd event is stored once, whatever happened to the rest.
  const allAccepted = await eventually(
    async () => (await h.db.event.count({ where: { environmentId: env, messageId: { in: accepted } } })) === accepted.length,
    {
      timeoutMs: 30_000,
      intervalMs: 200,
    },
  );
  t.true(allAccepted, 'every 202 stored');
  t.true(await drained(), 'queue drained');
  const sentIds = new Set([...accepted, ...inDoubt.map((b) => b.messageId as string)]);
  const afterKill = await rowsPerId();
  t.deepEqual(
    accepted.filter((id) => afterKill.get(id) !== 1),
    [],
    'every accepted messageId has exactly one row',
  );
  t.deepEqual(
    [...afterKill].filter(([id, n]) => n !== 1 || !sentIds.has(id)),
    [],
    'no row twice, no row for an event never sent',
  );
  const landed = inDoubt.filter((b) => afterKill.has(b.messageId as string)).length;
  t.log(`${landed} of ${inDoubt.length} cut-off events had landed in Redis before the kill`);

  // The client's retry (same body, same messageId) on a gateway that is up.
  const second = await spawnIntake('gateway', h.env);
  children.push(second);
  for (const body of inDoubt) {
    const reply = await request(second.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
    t.is(reply.status, 202, reply.text);
  }
  const all = await eventually(async () => (await h.db.event.count({ where: { environmentId: env } })) >= sentIds.size, { timeoutMs: 30_000, intervalMs: 200 });
  t.true(all, `all ${sentIds.size} sent events stored`);
  t.true(await drained(), 'queue drained after the retries');

  const final = await rowsPerId();
  t.is(final.size, sentIds.size);
  t.deepEqual(
    [...sentIds].filter((id) => final.get(id) !== 1),
    [],
    'every sent messageId has exactly one row',
  );
  t.is(await h.db.event.count({ where: { environmentId: env } }), sentIds.size, 'no second row for any messageId');
  // Stored whole: each row holds the body its 202 was for.
  const rows = await h.db.event.findMany({ where: { environmentId: env }, select: { messageId: true, payload: true, status: true } });
  const wrong = rows.filter((r) => {
    const payload = JSON.parse(r.payload);
    const [, , c, i] = r.messageId.split('-');
    return payload.messageId !== r.messageId || payload.properties.c !== Number(c) || payload.properties.i !== Number(i) || r.status !== 'processed';
  });
  t.deepEqual(wrong, [], 'every row is the event sent, processed');
  t.deepEqual(await queue.getJobCounts('failed'), { failed: 0 });
});
