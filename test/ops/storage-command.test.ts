// `intake storage` as an operator runs it, against a database of its own holding old and new
// partitions: per table rows and bytes, the partitions, the oldest event and what retention
// removes next; a usage mistake exits 2.
import test from 'ava';
import { DAY_MS, partitionDay, partitionName, utcDay } from '../../events/partition-plan.ts';
import { poolOf } from '../../platform/db.ts';
import { insertEventsOnce } from '../../events/event-store.ts';
import { createPartitionsFor } from '../../events/storage.ts';
import { newTenant, openHarness, ownDatabase, type Harness } from '../helpers/services.ts';
import { intake } from '../security/cli.ts';

let h: Harness;
let url: string;
test.before(async () => {
  url = await ownDatabase('storage_cmd');
  h = await openHarness({ DATABASE_URL: url });
});
test.after.always(() => h?.close());

test('storage prints each table with its rows, bytes, partitions and next removal', async (t) => {
  const tenant = await newTenant(h);
  const oldest = utcDay(Date.now()) - 40 * DAY_MS;
  await createPartitionsFor(poolOf(h.db), oldest, oldest);
  const row = (messageId: string, receivedAt: number) => ({
    environmentId: tenant.environmentId,
    messageId,
    event: 'Order Completed',
    userId: 'u',
    anonymousId: null,
    timestampMs: receivedAt,
    receivedAt,
    payload: '{}',
    status: 'processed' as const,
    withinLimits: true,
    limitReason: null,
    drivesJourneys: true,
    error: null,
  });
  await insertEventsOnce(h.db, [row('old', oldest + 5000), row('new', Date.now())]);

  const before = Date.now();
  const out = await intake({ DATABASE_URL: url, EVENTS_RETENTION_DAYS: '60', ADDRESS_HISTORY_DAYS: '30' }, ['storage']);
  t.is(out.code, 0, out.stderr);
  const report = JSON.parse(out.stdout);
  t.deepEqual(Object.keys(report), ['events', 'event_ids', 'identify_messages', 'address_claims', 'outbox_events', 'consent_decisions']);
  const { events } = report;
  t.true(events.rows >= 2);
  t.false(events.rowsEstimated);
  t.true(events.bytes > 0);
  // (Its database stays between runs: an earlier day's run may have left an older partition.)
  t.true(events.oldestPartition <= partitionName(oldest));
  const oldestDay = partitionDay(events.oldestPartition)!;
  t.true(events.partitions >= 4);
  t.true(events.partitionsAheadDays >= 1);
  t.is(Date.parse(events.oldestEvent) <= oldest + 5000, true);
  t.is(events.retentionDays, 60);
  // Its day ended 39 days ago or earlier: past a 60-day retention once all of it is 60 days old.
  t.deepEqual(events.nextRemoval, { partition: events.oldestPartition, from: new Date(oldestDay + DAY_MS + 60 * DAY_MS).toISOString() });
  t.true(report.event_ids.rows >= 2);
  t.is(report.consent_decisions.kept, 'always: the proof of consent');
  // Address claims go an hour past the 30 days (HISTORY_REMOVAL_MARGIN_MS), all but the address as of then.
  const { address_claims: claims } = report;
  t.is(claims.keptDays, 30);
  t.is(claims.nextRemoval.except, 'the address as of then, per profile and channel');
  const horizon = Date.parse(claims.nextRemoval.atOrBefore);
  t.true(horizon >= before - 30 * DAY_MS - 3_600_000 && horizon <= Date.now() - 30 * DAY_MS - 3_600_000, claims.nextRemoval.atOrBefore);

  const forever = JSON.parse((await intake({ DATABASE_URL: url }, ['storage'])).stdout);
  t.is(forever.events.retentionDays, 'forever');
  t.is(forever.events.nextRemoval, null);
  t.is(forever.address_claims.keptDays, 'forever');
  t.is(forever.address_claims.nextRemoval, null);
});

test('storage takes no arguments: exit 2 with the usage', async (t) => {
  const out = await intake({ DATABASE_URL: url }, ['storage', 'extra']);
  t.is(out.code, 2);
  t.regex(out.stderr, /usage: intake storage/);
});
