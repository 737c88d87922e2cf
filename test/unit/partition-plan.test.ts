import test from 'ava';
import {
  clampedReceipt,
  DAY_MS,
  daysAhead,
  daysBetween,
  daysPastRetention,
  daysToCreate,
  partitionDay,
  partitionName,
  retentionBound,
  retentionCutoff,
  utcDay,
} from '../../events/partition-plan.ts';

const d = (iso: string) => Date.parse(iso);

test('a partition is named after its UTC day, and the name gives the day back', (t) => {
  t.is(partitionName(d('2026-11-27T00:00:00Z')), 'events_p20261127');
  t.is(partitionDay('events_p20261127'), d('2026-11-27T00:00:00Z'));
  for (const name of ['events_p20261332', 'events_p2026112', 'events', 'events_legacy', 'events_p20260230']) t.is(partitionDay(name), null, name);
});

test('23:59:59.999 is the day before 00:00:00.000', (t) => {
  t.is(utcDay(d('2026-11-27T23:59:59.999Z')), d('2026-11-27T00:00:00Z'));
  t.is(utcDay(d('2026-11-28T00:00:00.000Z')), d('2026-11-28T00:00:00Z'));
  t.is(utcDay(d('1969-12-31T23:59:59.999Z')), d('1969-12-31T00:00:00Z'));
});

test('the days to make: yesterday through the days ahead, less those that exist', (t) => {
  const now = d('2026-11-27T13:00:00Z');
  const day = (n: number) => d('2026-11-27T00:00:00Z') + n * DAY_MS;
  t.deepEqual(daysToCreate(new Set(), now, 2), [day(-1), day(0), day(1), day(2)]);
  t.deepEqual(daysToCreate(new Set([day(-1), day(0), day(2)]), now, 2), [day(1)]);
  t.deepEqual(daysToCreate(new Set([day(-1), day(0), day(1), day(2)]), now, 2), []);
});

test('days between two times: each day once, both ends included', (t) => {
  t.deepEqual(daysBetween(d('2026-11-27T23:00:00Z'), d('2026-11-29T01:00:00Z')), [d('2026-11-27'), d('2026-11-28'), d('2026-11-29')]);
  t.deepEqual(daysBetween(d('2026-11-27T01:00:00Z'), d('2026-11-27T02:00:00Z')), [d('2026-11-27')]);
});

test('retention drops a partition only once all of its day is past the bound; forever drops none', (t) => {
  const now = d('2026-11-27T12:00:00Z');
  const days = [d('2026-11-23'), d('2026-11-24'), d('2026-11-25'), d('2026-11-26'), d('2026-11-27')];
  t.is(retentionBound(now, 3), d('2026-11-24T12:00:00Z'));
  t.deepEqual(daysPastRetention(days, now, 3), [d('2026-11-23')]);
  // Exactly at the bound: the day's end equals the bound, so all of it is past.
  t.deepEqual(daysPastRetention(days, d('2026-11-27T00:00:00Z'), 3), [d('2026-11-23')]);
  t.deepEqual(daysPastRetention(days, d('2026-11-26T23:59:59.999Z'), 3), []);
  t.deepEqual(daysPastRetention(days, now, null), []);
  t.is(retentionBound(now, null), null);
});

test('the retention cutoff is the start of the oldest day kept whole: an event received before it is past retention, its messageId free again', (t) => {
  t.is(retentionCutoff(d('2026-11-27T12:00:00Z'), 1), d('2026-11-26T00:00:00Z'));
  t.is(retentionCutoff(d('2026-11-27T00:00:00Z'), 1), d('2026-11-26T00:00:00Z'));
  t.is(retentionCutoff(d('2026-11-26T23:59:59.999Z'), 1), d('2026-11-25T00:00:00Z'));
  t.is(retentionCutoff(d('2026-11-27T12:00:00Z'), null), null);
  // The same rule as the partitions': a day is dropped exactly when it is before the cutoff.
  const days = Array.from({ length: 10 }, (_, i) => d('2026-11-20') + i * DAY_MS);
  for (const now of [d('2026-11-27T00:00:00Z'), d('2026-11-27T05:00:00Z'), d('2026-11-29T23:59:59.999Z')]) {
    const cutoff = retentionCutoff(now, 2)!;
    t.deepEqual(
      daysPastRetention(days, now, 2),
      days.filter((day) => day < cutoff),
    );
  }
});

test('a receipt further ahead of the trusted clock than the future bound is clamped to its now; closer ones stand', (t) => {
  const now = d('2026-12-05T12:00:00Z');
  t.is(clampedReceipt(now + 20 * DAY_MS, now), now);
  t.is(clampedReceipt(now + 5 * 60_000 + 1, now), now);
  t.is(clampedReceipt(now + 5 * 60_000, now), now + 5 * 60_000);
  t.is(clampedReceipt(now - 3 * DAY_MS, now), now - 3 * DAY_MS);
});

test('days ahead counts the partitions after today without a gap', (t) => {
  const now = d('2026-11-27T12:00:00Z');
  const day = (n: number) => d('2026-11-27T00:00:00Z') + n * DAY_MS;
  t.is(daysAhead(new Set([day(0)]), now), 0);
  t.is(daysAhead(new Set([day(0), day(1), day(2), day(4)]), now), 2);
  t.is(daysAhead(new Set([day(2), day(3)]), now), 0);
});
