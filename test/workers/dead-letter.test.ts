// A poison event inside a batch: PostgreSQL refuses the batch for one event's data (a CHECK
// constraint of this file's own database stands in for any data-dependent refusal). The
// worker bisects until that event stands alone: the other 199 are stored, it is recorded
// `failed` and waits in the dead-letter queue until an operator retries it (the `intake events
// retry` command, the dashboard).
import test from 'ava';
import { eventsGet, eventsRetry } from '../../cli/commands/events.ts';
import { OperatorError } from '../../operations/operator.ts';
import { createLogger } from '../../platform/logger.ts';
import { DEAD_LETTER_QUEUE, jobIdFor } from '../../platform/queues.ts';
import { eventBatchName } from '../../events/jobs.ts';
import { startDashboard } from '../../gateway/dashboard.ts';
import { batchCompleted, queuedEvent } from '../helpers/batches.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request } from '../helpers/http.ts';
import { capturedLogger, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, ownDatabase, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
test.before(async () => {
  h = await openHarness({ DATABASE_URL: await ownDatabase('dead_letter') });
  await h.db.$executeRawUnsafe('ALTER TABLE events DROP CONSTRAINT IF EXISTS poison');
});
test.after.always(async () => {
  await h?.db.$executeRawUnsafe('ALTER TABLE events DROP CONSTRAINT IF EXISTS poison').catch(() => {});
  await closeEmptied(h);
});

const queued = (tenant: Tenant, body: Record<string, unknown>, receivedAt?: number) => queuedEvent(tenant.environmentId, body, receivedAt);

test('a poison event inside a batch of 200 fails alone: 199 stored, one failed and dead-lettered, retryable', async (t) => {
  const tenant = await newTenant(h);
  // Refuses a processed `Poison` event (and nothing else): a failed one may still be recorded.
  // NOT VALID: rows of earlier runs in this database are not checked.
  await h.db.$executeRawUnsafe(`ALTER TABLE events ADD CONSTRAINT poison CHECK (status <> 'processed' OR event <> 'Poison') NOT VALID`);
  const stamp = Date.now();
  const events = Array.from({ length: 200 }, (_, i) =>
    queued(tenant, { messageId: `p-${stamp}-${i}`, event: i === 137 ? 'Poison' : 'Fine', properties: { i } }),
  );
  const poison = events[137].messageId;
  const batch = await h.operator.eventsQueue().add(eventBatchName(200), { events });
  const { log, records } = capturedLogger();
  const worker = await workerInProcess(h, log);
  t.teardown(() => worker.close());
  const about = (messageId: string) => records.filter((r) => r.messageId === messageId).map((r) => r.msg);

  t.true(await batchCompleted(h.operator.eventsQueue(), batch.id!), 'the batch completed');
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId } });
  t.is(rows.length, 200);
  t.is(rows.filter((r) => r.status === 'processed').length, 199);
  const failed = rows.find((r) => r.status === 'failed')!;
  t.is(failed.messageId, poison);
  t.regex(failed.error!, /^23514: .*poison/);

  const dead = await eventually(async () => {
    const job = await h.operator.deadLetterQueue().getJob(jobIdFor(tenant.environmentId, poison));
    return job && (await job.getState()) === 'failed' ? job : null;
  });
  t.truthy(dead, 'in the dead-letter queue, failed');
  t.is(dead!.failedReason, failed.error!);
  t.deepEqual(dead!.data.event, events[137]);
  t.is((await h.operator.deadLetterQueue().getJobCounts('failed')).failed, 1, 'only the poison event');
  t.like(await eventsGet(h.operator, [tenant.slug, poison]), { status: 'failed', error: failed.error });
  // The log names the refused event's messageId (an operator greps for it), with the refusal and
  // its batch job; each stored event has a debug line with its messageId.
  const refusal = records.find((r) => r.messageId === poison && r.level === 50);
  t.like(refusal, { jobId: batch.id, environmentId: tenant.environmentId, err: failed.error });
  t.regex(refusal!.msg as string, /refused by PostgreSQL.*dead-letter queue/);
  t.deepEqual(about(events[0].messageId), ['event persisted']);
  t.like(
    records.find((r) => r.messageId === events[199].messageId),
    { level: 20, jobId: batch.id },
  );
  t.false(about(poison).includes('event persisted'));
  // Counted: 199 stored, one failed; the received-to-stored lag counts the stored ones only.
  const metrics = (await request(`http://127.0.0.1:${worker.metricsPort}`, '/metrics', { method: 'GET' })).text;
  const sample = (line: string) =>
    Number(
      metrics
        .split('\n')
        .find((l) => l.startsWith(line + ' '))
        ?.slice(line.length + 1),
    );
  t.is(sample('intake_worker_events_total{outcome="stored"}'), 199);
  t.is(sample('intake_worker_events_total{outcome="failed"}'), 1);
  t.is(sample('intake_worker_stored_lag_seconds_count'), 199);
  // Not retried on its own.
  await sleep(300);
  t.is(await dead!.getState(), 'failed');

  // Still refused: the retry fails again and the event stays failed.
  t.deepEqual(await eventsRetry(h.operator, [tenant.slug, poison]), { messageId: poison, status: 'retrying' });
  const again = await eventually(async () => {
    const job = await h.operator.deadLetterQueue().getJob(jobIdFor(tenant.environmentId, poison));
    return job && job.attemptsMade === 2 && (await job.getState()) === 'failed' ? job : null;
  });
  t.truthy(again, 'retried once, refused again');
  t.true(await eventually(async () => about(poison).includes('dead-lettered event refused again on retry')), 'the second refusal is logged with the messageId');
  t.like(await eventsGet(h.operator, [tenant.slug, poison]), { status: 'failed' });

  // The cause is fixed: an operator retries it from the dashboard (writable, so behind a password), which stores it.
  await h.db.$executeRawUnsafe('ALTER TABLE events DROP CONSTRAINT poison');
  const operator = { authorization: `Basic ${Buffer.from('admin:pw').toString('base64')}` };
  const board = await startDashboard({
    config: { ...h.config, dashboardPort: 0, dashboardReadOnly: false, dashboardUser: 'admin', dashboardPassword: 'pw' },
    db: h.db,
    log: createLogger('silent', 'test-dashboard'),
  });
  t.teardown(() => board.close());
  const listed = await request(`http://127.0.0.1:${board.port}`, '/api/queues', { method: 'GET', headers: operator });
  t.like(
    (listed.json.queues as { name: string; counts: Record<string, number> }[]).find((q) => q.name === DEAD_LETTER_QUEUE),
    { counts: { failed: 1 } },
  );
  const retried = await request(`http://127.0.0.1:${board.port}`, `/api/queues/${DEAD_LETTER_QUEUE}/${again!.id}/retry`, { method: 'PUT', headers: operator });
  t.true(retried.status >= 200 && retried.status < 300, `${retried.status} ${retried.text}`);
  const processed = await eventually(async () => {
    const got = await eventsGet(h.operator, [tenant.slug, poison]);
    return got.status === 'processed' ? got : null;
  });
  t.like(processed, { messageId: poison, status: 'processed', error: null });
  // The row commits a moment before the job completes.
  const completed = await eventually(
    async () => (await (await h.operator.deadLetterQueue().getJob(jobIdFor(tenant.environmentId, poison)))!.getState()) === 'completed',
  );
  t.true(completed, 'the dead-letter job completed');
  t.true(about(poison).includes('dead-lettered event stored on retry'));
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId } }), 200);
  await t.throwsAsync(eventsRetry(h.operator, [tenant.slug, poison]), { instanceOf: OperatorError, message: /has not failed/ });
});
