// SIGTERM: a gateway stops accepting, answers what it already received, and exits 0; a
// worker finishes its active jobs and exits 0 (nothing it took is left half-done).
import { spawn } from 'node:child_process';
import test from 'ava';
import { keyCreate } from '../../cli/commands/key.ts';
import { createLogger } from '../../platform/logger.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import { startGateway } from '../../gateway/server.ts';
import { startWorkers } from '../../workers/main.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { halfSentTracks, request, trackBody } from '../helpers/http.ts';
import { spawnIntake } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => h.close());

test('gateway: requests in flight at SIGTERM are answered, then it exits 0 and refuses new connections', async (t) => {
  const tenant = await newTenant(h);
  // The body's bound is not under test here: a loaded machine must not reach it.
  const gw = await spawnIntake('gateway', { ...h.env, BODY_TIMEOUT_MS: '60000' });
  t.teardown(() => void gw.kill('SIGKILL'));
  // Each request has its headers and part of its body on the wire when the signal arrives.
  const started = halfSentTracks(gw.url, tenant.slug, tenant.key, 10);
  // The server must have read every request's headers, or a busy machine's SIGTERM finds idle connections.
  const allReading = async () => /^intake_http_uploads_in_progress 10$/m.test((await request(gw.url, '/metrics', { method: 'GET' })).text);
  t.true(await eventually(allReading, { timeoutMs: 10_000, intervalMs: 50 }), 'all ten requests reached the gateway');
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
  for (const s of started) s.finish();
  t.deepEqual(
    (await Promise.all(started.map((s) => s.reply))).map((r) => r.status),
    Array(10).fill(202),
  );
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

test('npm run gateway: a SIGTERM sent to npm reaches the gateway, which drains and exits', async (t) => {
  const child = spawn('npm', ['run', '-s', 'gateway'], { env: { ...process.env, ...h.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => void child.kill('SIGKILL'));
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  t.true(await eventually(async () => /"msg":"gateway listening"/.test(out), { timeoutMs: 30_000 }), out);
  const port = Number(/"port":(\d+)/.exec(out)![1]);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
  t.true(await eventually(async () => /"msg":"gateway stopped"/.test(out), { timeoutMs: 10_000 }), `the gateway itself drained:\n${out}`);
  const refused = await request(`http://127.0.0.1:${port}`, '/healthz', { method: 'GET', timeoutMs: 2000 }).then(
    () => false,
    () => true,
  );
  t.true(refused, 'nothing listens any more');
});

// BullMQ reports a queue's connection setup failing as an 'error' event; closing a queue strips
// its listeners, so a close while that setup is in flight would end the process (`intake dev`
// given SIGTERM right after it starts); closeQueues() waits for the setup to settle.
test('a gateway, worker and dashboard closed the moment they start close cleanly, without an unhandled error', async (t) => {
  const log = createLogger('silent', 'test');
  for (let round = 0; round < 3; round++) {
    const gateway = await startGateway({ config: h.config, db: h.db, log });
    await gateway.close();
    const workers = await startWorkers({ config: { ...h.config, workerMetricsPort: 0 }, db: h.db, log });
    await workers.close();
    const dashboard = await startDashboard({ config: { ...h.config, dashboardPort: 0 }, db: h.db, log });
    await dashboard.close();
  }
  // An unhandled 'error' event would have failed this test file before reaching here.
  await sleep(200);
  t.pass();
});
