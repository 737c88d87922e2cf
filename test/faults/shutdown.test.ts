// SIGTERM: a gateway stops accepting, answers what it already received, and exits 0; a
// worker finishes its active jobs and exits 0 (nothing it took is left half-done).
import http from 'node:http';
import test from 'ava';
import { keyCreate } from '../../cli/commands/key.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { spawnIntake } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

test('gateway: requests in flight at SIGTERM are answered, then it exits 0 and refuses new connections', async (t) => {
  const tenant = await newTenant(h);
  const gw = await spawnIntake('gateway', h.env);
  t.teardown(() => void gw.kill('SIGKILL'));
  const { port } = new URL(gw.url);
  // Each request has its headers and half its body on the wire when the signal arrives.
  const started = Array.from({ length: 10 }, () => {
    const body = Buffer.from(JSON.stringify(trackBody()));
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: `/api/track/${tenant.slug}`,
      headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', 'content-length': body.length },
    });
    // A dropped request resolves as 0, so the assertion below names it instead of an unhandled rejection.
    const reply = new Promise<number>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', () => resolve(0));
    });
    req.write(body.subarray(0, 20));
    return { req, body, reply };
  });
  await sleep(300);
  gw.process.kill('SIGTERM');
  // Once draining it accepts no new connection (poll: the signal takes a moment to land).
  const refused = await eventually(
    () =>
      request(gw.url, '/healthz', { method: 'GET', timeoutMs: 1000 }).then(
        () => false,
        () => true,
      ),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.true(refused, 'no new connections once draining');
  for (const s of started) s.req.end(s.body.subarray(20));
  t.deepEqual(await Promise.all(started.map((s) => s.reply)), Array(10).fill(202));
  t.is(await gw.exited, 0);
  t.regex(gw.output(), /"msg":"gateway stopped"/);
});

test('worker: SIGTERM lets active jobs finish and the process exits 0', async (t) => {
  const tenant = await newTenant(h);
  const { key } = await keyCreate(h.operator, [tenant.slug]);
  const gw = await spawnIntake('gateway', h.env);
  t.teardown(() => void gw.kill('SIGKILL'));
  const ids: string[] = [];
  for (let i = 0; i < 200; i++) {
    const body = trackBody();
    ids.push(body.messageId as string);
    t.is((await request(gw.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': key }, body })).status, 202);
  }
  const worker = await spawnIntake('worker', h.env);
  t.teardown(() => void worker.kill('SIGKILL'));
  await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) > 0, { intervalMs: 10 });
  t.is(await worker.kill('SIGTERM'), 0);
  t.true(/"msg":"worker stopped"/.test(worker.output()));
  // Whatever it had taken is stored; the rest is still queued, none is lost or stuck active.
  const stored = await h.db.event.count({ where: { environmentId: tenant.environmentId } });
  const counts = await h.operator.eventsQueue().getJobCounts('waiting', 'active', 'failed');
  t.is(counts.active, 0);
  t.is(counts.failed, 0);
  t.true(stored >= 1);
  const second = await spawnIntake('worker', h.env);
  t.teardown(() => void second.kill('SIGKILL'));
  t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === ids.length));
});
