// Journey timers survive the loss of every worker: they are rows in PostgreSQL, swept by
// whichever worker runs. This file runs on its own database, because every worker of the
// test database sweeps every due timer there (timers are not partitioned by queue prefix).
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { journeyCreate, journeyPublish, journeyRuns, journeyStatsCommand } from '../../cli/commands/journey.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake } from '../helpers/processes.ts';
import { newTenant, openHarness, ownDatabase } from '../helpers/services.ts';

let OWN_DATABASE_URL: string;

let dir: string;
test.before(async () => {
  OWN_DATABASE_URL = await ownDatabase('journeys');
  dir = await mkdtemp(path.join(tmpdir(), 'intake-journey-restart-'));
});

test('a run waiting on a timer finishes after the workers are killed and others start', async (t) => {
  // The kill may land after a batch's runs committed but before its job completed: that job holds
  // the journey watermark until its lock lapses and it runs again. A short lock keeps that wait
  // inside the test's deadline (15 s by default, plus half of it for the stall check).
  const h2 = await openHarness({ JOURNEY_TICK_MS: '50', WORKER_LOCK_MS: '2000', DATABASE_URL: OWN_DATABASE_URL });
  let worker = await spawnIntake('worker', h2.env);
  const gw = await gatewayInProcess(h2);
  try {
    const tenant = await newTenant(h2);
    const file = path.join(dir, 'restart.json');
    await writeFile(
      file,
      JSON.stringify({
        name: 'Onboarding',
        entry: { event: 'Signed Up' },
        steps: [{ delay: { ms: 1500 } }, { send: { channel: 'email', template: 'later' } }],
      }),
    );
    const created = await journeyCreate(h2.operator, [tenant.slug, '--file', file]);
    await journeyPublish(h2.operator, [tenant.slug, created.id]);
    for (let i = 0; i < 5; i++) {
      const reply = await request(gw.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ userId: `sleeper-${i}` }) });
      t.is(reply.status, 202);
    }
    const entered = await eventually(async () => (await journeyStatsCommand(h2.operator, [tenant.slug, created.id])).active === 5);
    t.true(entered, 'five runs waiting');
    await worker.kill('SIGKILL');
    await sleep(1800); // the delay ends while no worker runs
    t.like(await journeyStatsCommand(h2.operator, [tenant.slug, created.id]), { active: 5 });
    worker = await spawnIntake('worker', h2.env);
    const done = await eventually(async () => (await journeyStatsCommand(h2.operator, [tenant.slug, created.id])).completed === 5);
    t.true(done, 'every run completed after the restart');
    const all = await journeyRuns(h2.operator, [tenant.slug, created.id]);
    t.deepEqual(
      all.map((r) => r.messages.length),
      [1, 1, 1, 1, 1],
    );
  } finally {
    await worker.kill('SIGTERM');
    await gw.close();
    await h2.close();
  }
});
