// A worker process SIGKILLed in the middle of a backlog: its jobs return to the queue once
// their locks lapse, a second worker finishes them, and every event is stored exactly once
// and starts its journey exactly once.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { journeyCreate, journeyPublish, journeyStatsCommand } from '../../cli/commands/journey.ts';
import { storedTrackPayload } from '../../events/track-payload.ts';
import { eventBatchName, type QueuedEvent } from '../../events/jobs.ts';
import { checkTrack } from '../../events/track.ts';
import { eventually } from '../helpers/eventually.ts';
import { trackBody } from '../helpers/http.ts';
import { harnessWithProcesses, spawnIntake, type Child } from '../helpers/processes.ts';
import { newTenant, type Harness } from '../helpers/services.ts';

let h: Harness;
let children: Child[];

harnessWithProcesses(test, (...opened) => ([h, children] = opened), { emptied: true });

const N = 2000;
/** Events per batch job, as one gateway group commit would write them. */
const BATCH = 50;

test('a worker killed mid-batch loses and doubles nothing', async (t) => {
  const tenant = await newTenant(h);
  const queue = h.operator.eventsQueue();
  // Every `Even` event starts a journey for its own user: each must start exactly once.
  const file = path.join(await mkdtemp(path.join(tmpdir(), 'intake-kill-')), 'journey.json');
  await writeFile(file, JSON.stringify({ name: 'kill', entry: { event: 'Even' }, steps: [{ send: { channel: 'email', template: 'hi' } }] }));
  const journey = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
  await journeyPublish(h.operator, [tenant.slug, journey.id]);

  // The backlog, shaped exactly as gateway/event-batcher.ts enqueues it.
  const ids: string[] = [];
  const events: QueuedEvent[] = [];
  for (let i = 0; i < N; i++) {
    const body = trackBody({ messageId: `kill-${i}-${Date.now()}`, userId: `user-${i}`, event: i % 2 ? 'Odd' : 'Even', properties: { i } });
    const checked = checkTrack(body);
    if (!checked.ok) throw new Error(checked.message);
    ids.push(checked.event.messageId);
    events.push({
      environmentId: tenant.environmentId,
      messageId: checked.event.messageId,
      receivedAt: Date.now(),
      timestampMs: checked.timestampMs,
      payload: storedTrackPayload(body),
    });
  }
  const jobs = [];
  for (let i = 0; i < N; i += BATCH) jobs.push({ name: eventBatchName(BATCH), data: { events: events.slice(i, i + BATCH) } });
  await queue.addBulk(jobs);
  t.is(await queue.count(), N / BATCH);

  const rows = () => h.db.event.count({ where: { environmentId: tenant.environmentId } });
  // Few batches at once, so that the kill finds some active and many still waiting.
  const env = { ...h.env, WORKER_LOCK_MS: '2000', WORKER_CONCURRENCY: '4' };

  const first = await spawnIntake('worker', env);
  children.push(first);
  const some = await eventually(async () => (await rows()) >= N / 10, { timeoutMs: 30_000, intervalMs: 20 });
  t.true(some, 'the first worker stored some events');
  t.is(await first.kill('SIGKILL'), 'SIGKILL');
  const atKill = await rows();
  t.log(`first worker killed after storing ${atKill} of ${N}`);
  t.true(atKill < N, 'killed before the backlog was done');
  // Jobs it held are still locked by the dead worker: active, not failed.
  const held = await queue.getJobs(['active'], 0, -1);
  t.is((await queue.getJobCounts('failed')).failed, 0);

  const second = await spawnIntake('worker', env);
  children.push(second);
  const all = await eventually(async () => (await rows()) >= N, { timeoutMs: 40_000, intervalMs: 200 });
  t.true(all, `all ${N} events stored (${await rows()} so far)`);
  // Let stragglers finish: nothing must be stored twice or left behind.
  t.true(
    await eventually(
      async () => {
        const c = await queue.getJobCounts('wait', 'active', 'delayed', 'prioritized', 'paused');
        return Object.values(c).every((n) => n === 0);
      },
      { timeoutMs: 20_000 },
    ),
  );

  t.is(await rows(), N);
  const perId = await h.db.event.groupBy({ by: ['messageId'], where: { environmentId: tenant.environmentId }, _count: { _all: true } });
  t.is(perId.length, N);
  t.true(perId.every((r) => r._count._all === 1));
  t.deepEqual(perId.map((r) => r.messageId).sort(), [...ids].sort());
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, status: { not: 'processed' } } }), 0);
  // Every batch completed (completed batches leave Redis at once), none failed.
  t.deepEqual(await queue.getJobCounts('completed', 'failed'), { completed: 0, failed: 0 });

  t.deepEqual(await journeyStatsCommand(h.operator, [tenant.slug, journey.id]), { entered: N / 2, active: 0, completed: N / 2, exited: 0, converted: 0 });
  const sends = await h.db.journeyMessage.groupBy({ by: ['runId'], where: { journeyId: journey.id }, _count: { _all: true } });
  t.is(sends.length, N / 2);
  t.true(sends.every((r) => r._count._all === 1));

  // The kill really interrupted jobs, and the ones it held were taken over: gone from Redis
  // (completed) with each of their events stored once (checked above).
  t.log(`${held.length} batch jobs active at the kill`);
  t.true(held.length > 0, 'the kill interrupted batches');
  for (const job of held) t.is(await queue.getJob(job.id!), undefined, `batch ${job.id} completed`);
});
