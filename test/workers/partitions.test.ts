// events partitioned by day against the real PostgreSQL: where rows land, the messageId
// identity across partitions, partitions made by two workers at once, retention dropping
// exactly the partitions past the bound while Track runs, and the reads across partitions.
// A database of the file's own: partitions are global to a database.
import test from 'ava';
import pg from 'pg';
import { DAY_MS, partitionName } from '../../events/partition-plan.ts';
import { poolOf } from '../../platform/db.ts';
import { hashStored } from '../../platform/identity-hash.ts';
import { toPgText } from '../../platform/pg-text.ts';
import { eventNames, findEvent, insertEventsOnce, recentEvents, type EventRow } from '../../events/event-store.ts';
import { createEventPartitions, createPartitionsFor, dropEventPartition, eventPartitions, STORAGE_MAINTENANCE_LOCK } from '../../events/storage.ts';
import { maintenanceRound } from '../../workers/storage-maintenance.ts';
import { persistEvent } from '../../workers/persist-event.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { newTenant, openHarness, ownDatabase, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let url: string;

test.before(async () => {
  url = await ownDatabase('parts');
  h = await openHarness({ DATABASE_URL: url });
});

test.after.always(async () => {
  await h?.close();
});

function row(tenant: Tenant, messageId: string, receivedAt: number, extra: Partial<EventRow> = {}): EventRow {
  return {
    environmentId: tenant.environmentId,
    messageId,
    event: 'Order Completed',
    userId: 'u-1',
    anonymousId: null,
    timestampMs: receivedAt,
    receivedAt,
    payload: JSON.stringify({ type: 'track', messageId, event: 'Order Completed', userId: 'u-1' }),
    status: 'processed',
    withinLimits: true,
    limitReason: null,
    drivesJourneys: true,
    error: null,
    ...extra,
  };
}

/** insertEventsOnce, its days' partitions made first (the days of these tests are far from today). */
async function insert(rows: EventRow[]): Promise<number> {
  const times = rows.map((r) => r.receivedAt);
  await createPartitionsFor(poolOf(h.db), Math.min(...times), Math.max(...times));
  return insertEventsOnce(h.db, rows);
}

/** The partition holding each of the tenant's events, by messageId. */
async function partitionsOf(tenant: Tenant): Promise<Record<string, string>> {
  const { rows } = await poolOf(h.db).query<{ m: string; p: string }>(
    'SELECT message_id AS m, tableoid::regclass::text AS p FROM events WHERE environment_id = $1',
    [tenant.environmentId],
  );
  return Object.fromEntries(rows.map((r) => [r.m, r.p]));
}

const midnight = Date.UTC(2031, 0, 2);

test('an event at 23:59:59.999 and one at 00:00:00.000 land in the partitions of their days', async (t) => {
  const tenant = await newTenant(h);
  await insert([row(tenant, 'before', midnight - 1), row(tenant, 'after', midnight)]);
  t.deepEqual(await partitionsOf(tenant), { before: 'events_p20310101', after: 'events_p20310102' });
  const before = await findEvent(h.db, tenant.environmentId, 'before');
  t.is(before?.receivedAt, midnight - 1);
  t.is((await findEvent(h.db, tenant.environmentId, 'after'))?.receivedAt, midnight);
});

test('a messageId sent again across a partition boundary is stored once, in the first copy’s partition', async (t) => {
  const tenant = await newTenant(h);
  const first = row(tenant, 'dup', midnight - 1);
  t.is(await insert([first]), 1);
  // The resend, received a millisecond later in the next day's partition, in a batch with a new event.
  t.is(await insert([row(tenant, 'dup', midnight), row(tenant, 'new', midnight)]), 1);
  t.deepEqual(await partitionsOf(tenant), { dup: 'events_p20310101', new: 'events_p20310102' });
  // And through the worker's own path, days later (its trusted clock then), retention forever.
  t.false(
    await persistEvent(
      h.db,
      { environmentId: tenant.environmentId, messageId: 'dup', receivedAt: midnight + 3 * DAY_MS, timestampMs: midnight, payload: first.payload },
      'processed',
      null,
      { retentionDays: null, now: () => midnight + 3 * DAY_MS },
    ),
  );
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, messageId: 'dup' } }), 1);
});

test('a copy received first but stored after a later one of its messageId takes its place: the event kept is the one answered first', async (t) => {
  const tenant = await newTenant(h);
  // Two bodies of one messageId, 202 in turn, whose batches the workers reach in the other order
  // (two partitions, one behind a failed-over master): the later one is stored first.
  const early = row(tenant, 'turned', midnight - 1, { userId: 'u-early', payload: JSON.stringify({ userId: 'u-early' }) });
  const late = row(tenant, 'turned', midnight + 2000, { userId: 'u-late', payload: JSON.stringify({ userId: 'u-late' }) });
  t.is(await insert([late]), 1);
  t.is(await insert([early]), 1);
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId, messageId: 'turned' } });
  t.deepEqual(
    rows.map((r) => [r.userId, r.receivedAt.getTime()]),
    [['u-early', midnight - 1]],
  );
  t.deepEqual(await partitionsOf(tenant), { turned: 'events_p20310101' });
  t.like(await findEvent(h.db, tenant.environmentId, 'turned'), { receivedAt: midnight - 1, event: { userId: 'u-early' } });
  // Either copy delivered again stores nothing more.
  t.is(await insert([late]), 0);
  t.is(await insert([early]), 0);
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, messageId: 'turned' } }), 1);
});

test('a later copy another worker commits while the earlier one is being stored is displaced too', async (t) => {
  const tenant = await newTenant(h);
  await createPartitionsFor(poolOf(h.db), midnight - 1, midnight + 2000);
  const late = midnight + 2000;
  // Another worker storing the later copy, its transaction still open: the earlier copy's
  // statement starts without seeing it, then waits on its claim.
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  await other.query('BEGIN');
  const hash = hashStored(toPgText('raced'));
  await other.query('INSERT INTO event_ids (environment_id, message_hash, received_at) VALUES ($1, $2, $3)', [tenant.environmentId, hash, new Date(late)]);
  await other.query(
    `INSERT INTO events (environment_id, message_id, message_hash, event, user_id, "timestamp", received_at, payload, status, within_limits, drives_journeys)
     VALUES ($1, 'raced', $2, 'Order Completed', 'u-late', $3, $3, '{}', 'processed', true, true)`,
    [tenant.environmentId, hash, new Date(late)],
  );
  const storing = insertEventsOnce(h.db, [row(tenant, 'raced', midnight - 1, { userId: 'u-early' })]);
  await new Promise((resolve) => setTimeout(resolve, 300));
  await other.query('COMMIT');
  await other.end();
  t.is(await storing, 1);
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId, messageId: 'raced' } });
  t.deepEqual(
    rows.map((r) => r.userId),
    ['u-early'],
  );
});

test('a messageId whose first copy is past retention is a new event, whether or not the maintenance has removed its day yet', async (t) => {
  const tenant = await newTenant(h);
  const day = Date.UTC(2032, 4, 10);
  const first = day + 10 * 3_600_000;
  t.is(await insert([row(tenant, 'expiring', first), row(tenant, 'detached', first)]), 2);
  const resend = (messageId: string, at: number) =>
    persistEvent(
      h.db,
      { environmentId: tenant.environmentId, messageId, receivedAt: at, timestampMs: first, payload: row(tenant, messageId, at).payload },
      'processed',
      null,
      {
        retentionDays: 1,
        now: () => at,
      },
    );
  // A day later the first copy is within its retention: the same event.
  t.false(await resend('expiring', first + DAY_MS));
  // Once its whole day is past a day of retention it is a new event, though its partition is still there.
  const past = day + 2 * DAY_MS;
  t.false(await resend('expiring', past - 1));
  t.true(await resend('expiring', past));
  t.like(await findEvent(h.db, tenant.environmentId, 'expiring'), { receivedAt: past });
  // Between the detach of the day and the removal of its identities: the same. The day is
  // detached and removed under the storage maintenance's lock, as the maintenance does: the
  // harness's worker would otherwise finish the detached day itself, in between.
  const name = partitionName(day);
  const client = await poolOf(h.db).connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [STORAGE_MAINTENANCE_LOCK]);
    await client.query(`ALTER TABLE events DETACH PARTITION "${name}"`);
    t.true(await resend('detached', past + 5));
    // The maintenance then finishes the day: the new copies stay, each stored once.
    await dropEventPartition(client, name);
  } finally {
    await client.query('SELECT pg_advisory_unlock($1)', [STORAGE_MAINTENANCE_LOCK]);
    client.release();
  }
  for (const messageId of ['expiring', 'detached']) {
    t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, messageId } }), 1, messageId);
    t.truthy(await findEvent(h.db, tenant.environmentId, messageId), messageId);
  }
});

test('a failed event delivered again and stored becomes processed, whichever partition holds it', async (t) => {
  const tenant = await newTenant(h);
  await insert([row(tenant, 'retried', midnight - 1, { status: 'failed', error: 'boom' })]);
  t.is(await insert([row(tenant, 'retried', midnight + 5)]), 1);
  t.like(await findEvent(h.db, tenant.environmentId, 'retried'), { status: 'processed', error: null, receivedAt: midnight - 1 });
});

test('a received time with no partition yet makes its day’s partition and is stored, not refused', async (t) => {
  const tenant = await newTenant(h);
  const far = Date.UTC(2033, 5, 15, 12);
  const event = { environmentId: tenant.environmentId, messageId: 'far', receivedAt: far, timestampMs: far, payload: row(tenant, 'far', far).payload };
  // The trusted clock has reached that day (an event queued long ago, a worker down for days).
  t.true(await persistEvent(h.db, event, 'processed', null, { retentionDays: null, now: () => far + DAY_MS }));
  t.deepEqual(await partitionsOf(tenant), { far: 'events_p20330615' });
});

test('a receipt far ahead of the trusted clock is stored at the clock’s now: no partition is made for a day it has not reached', async (t) => {
  const tenant = await newTenant(h);
  const now = Date.UTC(2034, 2, 1, 12);
  const ahead = now + 20 * DAY_MS;
  const event = {
    environmentId: tenant.environmentId,
    messageId: 'ahead',
    receivedAt: ahead,
    timestampMs: ahead,
    payload: row(tenant, 'ahead', ahead).payload,
  };
  t.true(await persistEvent(h.db, event, 'processed', null, { retentionDays: null, now: () => now }));
  t.deepEqual(await partitionsOf(tenant), { ahead: 'events_p20340301' });
  t.like(await findEvent(h.db, tenant.environmentId, 'ahead'), { receivedAt: now });
  t.false((await eventPartitions(poolOf(h.db))).some((p) => p.name === partitionName(ahead - (ahead % DAY_MS))));
  // Within the future bound (clocks a minute apart) the gateway's time stands.
  const near = now + 60_000;
  const close = { ...event, messageId: 'near', receivedAt: near, payload: row(tenant, 'near', near).payload };
  t.true(await persistEvent(h.db, close, 'processed', null, { retentionDays: null, now: () => now }));
  t.like(await findEvent(h.db, tenant.environmentId, 'near'), { receivedAt: near });
});

test('the maintenance run by two workers at once makes each partition once', async (t) => {
  // Days no earlier run of this file made (its database stays between runs).
  const days = Array.from({ length: 6 }, (_, i) => Date.UTC(2100 + Math.floor(Math.random() * 5000), 2, 1) + i * DAY_MS);
  const pools = [new pg.Pool({ connectionString: url }), new pg.Pool({ connectionString: url })];
  t.teardown(() => Promise.all(pools.map((p) => p.end())));
  const made = await Promise.all([createEventPartitions(pools[0], days), createEventPartitions(pools[1], [...days].reverse())]);
  t.deepEqual([...made[0], ...made[1]].sort(), days.map(partitionName).sort());
  const names = (await eventPartitions(pools[0])).map((p) => p.name);
  for (const day of days) t.is(names.filter((n) => n === partitionName(day)).length, 1);
  // Two whole rounds at once: one holds the lock, the other only reads.
  const rounds = await Promise.all([maintenanceRound(pools[0], settings(null)), maintenanceRound(pools[1], settings(null))]);
  t.deepEqual(rounds.map((r) => r.ran).sort(), [false, true]);
  const now = Date.now();
  const after = new Set((await eventPartitions(pools[0])).map((p) => p.name));
  for (let d = -1; d <= 3; d++) t.true(after.has(partitionName(Math.floor(now / DAY_MS) * DAY_MS + d * DAY_MS)), `day ${d}`);
});

function settings(retentionDays: number | null) {
  return {
    eventsRetentionDays: retentionDays,
    eventPartitionsAheadDays: 3,
    identifyIdempotencyDays: 7,
    addressHistoryDays: null,
    storageMaintenanceMs: 60_000,
  };
}

test('retention drops exactly the partitions past the bound, with their identities, while a Track load loses nothing', async (t) => {
  const tenant = await newTenant(h);
  const pool = poolOf(h.db);
  // Four old days, 300 events each (2020-03-01 to 03-04).
  const old = Array.from({ length: 4 }, (_, i) => Date.UTC(2020, 2, 1) + i * DAY_MS);
  for (const day of old) {
    await insert(Array.from({ length: 300 }, (_, j) => row(tenant, `old-${day}-${j}`, day + j * 1000)));
  }
  // "now" is 2020-03-06 12:00 and retention 3 days: the bound is 03-03 12:00, so the partitions
  // of 03-01 and 03-02 are past it; 03-03 (half of it is newer) and 03-04 stay.
  const now = Date.UTC(2020, 2, 6, 12);
  const gateway = await gatewayInProcess(h);
  const worker = await workerInProcess(h);
  t.teardown(async () => {
    await worker.close();
    await gateway.close();
  });
  const sent: string[] = [];
  let stop = false;
  const load = (async () => {
    while (!stop || sent.length < 20) {
      const body = trackBody({ userId: 'live' });
      const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
      t.is(reply.status, 202);
      sent.push(body.messageId as string);
    }
  })();
  await new Promise((r) => setTimeout(r, 300));
  // The worker's own round (retention forever) may hold the lock a moment: this one runs once it is free.
  let round = await maintenanceRound(pool, settings(3), now);
  while (!round.ran) round = await maintenanceRound(pool, settings(3), now);
  stop = true;
  await load;
  t.deepEqual(
    round.dropped.map((d) => d.partition),
    ['events_p20200301', 'events_p20200302'],
  );
  t.deepEqual(
    round.dropped.map((d) => d.identitiesRemoved),
    [300, 300],
  );
  const names = new Set((await eventPartitions(pool)).map((p) => p.name));
  t.false(names.has('events_p20200301'));
  t.false(names.has('events_p20200302'));
  t.true(names.has('events_p20200303'));
  t.true(names.has('events_p20200304'));
  // Past the window a messageId is new again; inside it, a repeat is still one event.
  t.is(await insert([row(tenant, `old-${old[0]}-0`, Date.now())]), 1);
  t.is(await insert([row(tenant, `old-${old[3]}-0`, Date.now())]), 0);
  t.true(sent.length > 10);
  const stored = await eventually(async () => {
    const n = await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'live' } });
    return n === sent.length ? n : null;
  });
  t.is(stored, sent.length, 'every accepted Track event stored once');
});

test('events get, the live view, custom event names and activity read across partitions', async (t) => {
  const tenant = await newTenant(h);
  const now = Date.now();
  const yesterday = now - DAY_MS;
  await insert([row(tenant, 'y', yesterday, { event: 'Signed Up' }), row(tenant, 't', now, { event: 'Signed Up' })]);
  t.like(await findEvent(h.db, tenant.environmentId, 'y'), { receivedAt: yesterday });
  t.deepEqual(
    (await recentEvents(h.db, tenant.environmentId, {}, 10)).map((e) => e.messageId),
    ['t', 'y'],
  );
  t.deepEqual(
    (await recentEvents(h.db, tenant.environmentId, { userId: 'u-1' }, 10)).map((e) => e.messageId),
    ['t', 'y'],
  );
  t.deepEqual(await eventNames(h.db, tenant.environmentId, 7), [{ event: 'Signed Up', lastSeenAt: now, count: 2 }]);
});
