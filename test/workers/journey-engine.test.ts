// The journey engine against the real PostgreSQL, fed in orders that worker processes only
// produce now and then: the later event handled first, the same event handled twice, an event
// still on its way when a timer is due. The watermark is moved by hand, so this file runs on
// its own database: its sweeps must not move other files' runs, nor their workers these.
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { journeyCreate, journeyPublish, journeyRuns } from '../../cli/commands/journey.ts';
import { createLogger } from '../../platform/logger.ts';
import { insertEventsOnce, type EventRow } from '../../events/event-store.ts';
import { createJourneyEngine } from '../../journeys/engine.ts';
import { type Harness, newTenant, openHarness, ownDatabase, type Tenant } from '../helpers/services.ts';

let OWN_DATABASE_URL: string;

let h: Harness;
test.before(async () => {
  OWN_DATABASE_URL = await ownDatabase('engine');
  h = await openHarness({ DATABASE_URL: OWN_DATABASE_URL });
});
test.after.always(() => h?.close());

async function published(tenant: Tenant, definition: object): Promise<string> {
  const file = path.join(await mkdtemp(path.join(tmpdir(), 'intake-engine-')), 'j.json');
  await writeFile(file, JSON.stringify(definition));
  const { id } = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
  await journeyPublish(h.operator, [tenant.slug, id]);
  return id;
}

function row(tenant: Tenant, event: string, userId: string, receivedAt: number, messageId = `${event}-${userId}-${receivedAt}`): EventRow {
  const payload = JSON.stringify({ type: 'track', event, userId, messageId });
  return {
    environmentId: tenant.environmentId,
    messageId,
    event,
    userId,
    anonymousId: null,
    timestampMs: receivedAt,
    receivedAt,
    payload,
    status: 'processed',
    withinLimits: true,
    limitReason: null,
    drivesJourneys: true,
    error: null,
  };
}

/** The watermark the engine sees: tests move it by hand, as the oldest event still on its way would. */
let watermark = 0;
const engine = () => createJourneyEngine({ db: h.db, log: createLogger('silent', 'test'), watermark: async () => watermark, horizon: () => watermark });
/** Evaluates until nothing more moves (other tests' runs may share the sweep). */
async function evaluateUpTo(at: number) {
  watermark = at;
  while ((await engine().evaluateRuns()) > 0);
}

test.serial('an Activated handled before its Signed Up still ends the wait: the new run catches up', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, {
    name: 'j',
    entry: { event: 'Signed Up' },
    steps: [{ waitUntil: { event: 'Activated', timeoutMs: 60_000 } }],
    goal: { event: 'Purchased', windowMs: 60_000 },
  });
  const at = Date.now() + 1000;
  const entry = row(tenant, 'Signed Up', 'u', at);
  const later = [row(tenant, 'Activated', 'u', at + 5), row(tenant, 'Purchased', 'u', at + 6)];
  const before = row(tenant, 'Activated', 'v', at - 5);
  const otherEntry = row(tenant, 'Signed Up', 'v', at);
  await insertEventsOnce(h.db, [entry, ...later, before, otherEntry]);
  const e = engine();
  t.deepEqual(await e.handleEvents([...later, before]), [null, null, null]);
  t.deepEqual(await e.handleEvents([entry, otherEntry]), [null, null]);
  await evaluateUpTo(at + 10);
  const [u] = await journeyRuns(h.operator, [tenant.slug, id, '--user', 'u']);
  t.like(u, { status: 'completed', endedAt: at + 5, convertedAt: at + 6 });
  const [v] = await journeyRuns(h.operator, [tenant.slug, id, '--user', 'v']);
  t.like(v, { status: 'active', waitingFor: 'Activated' }, 'an Activated received before the entry does not count');
});

test.serial('handling an event again (a redelivered job, a second worker) changes nothing', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, { name: 'j', entry: { event: 'Signed Up' }, steps: [{ send: { channel: 'email', template: 'x' } }], reentry: true });
  const entry = row(tenant, 'Signed Up', 'u', Date.now() + 1000);
  await insertEventsOnce(h.db, [entry]);
  const [a, b] = [engine(), engine()];
  await Promise.all([a.handleEvents([entry]), b.handleEvents([entry]), a.handleEvents([entry])]);
  const runs = await journeyRuns(h.operator, [tenant.slug, id]);
  t.is(runs.length, 1);
  t.is(runs[0].messages.length, 1);
});

test.serial('a job whose messageId was first used by another event does not act for it', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, { name: 'j', entry: { event: 'Signed Up' }, steps: [] });
  const at = Date.now() + 1000;
  const first = row(tenant, 'Page Viewed', 'u', at, 'shared-id');
  await insertEventsOnce(h.db, [first]);
  await engine().handleEvents([row(tenant, 'Signed Up', 'u', at, 'shared-id')]);
  t.deepEqual(await journeyRuns(h.operator, [tenant.slug, id]), []);
});

/** A one-second delay, then a send; a Stop event exits the run. */
const DELAY_THEN_SEND = {
  name: 'j',
  entry: { event: 'Signed Up' },
  steps: [{ delay: { ms: 1000 } }, { send: { channel: 'email', template: 'x' } }],
  exitOn: ['Stop'],
};

const run = async (tenant: Tenant, id: string, user: string) => (await journeyRuns(h.operator, [tenant.slug, id, '--user', user]))[0];

test.serial('an exit received after a delay ended, handled before the timer fired, does not undo the step that was due', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, DELAY_THEN_SEND);
  const at = Date.now() + 1000;
  const rows = [row(tenant, 'Signed Up', 'u', at), row(tenant, 'Stop', 'u', at + 1050)];
  await insertEventsOnce(h.db, rows);
  await engine().handleEvents(rows);
  await evaluateUpTo(at + 2000);
  t.like(await run(tenant, id, 'u'), { status: 'completed', endedAt: at + 1000 });
  t.is((await run(tenant, id, 'u')).messages.length, 1);
});

test.serial('an exit received before a delay ended but still on its way when the delay is due: no send, the run exits', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, DELAY_THEN_SEND);
  const at = Date.now() + 1000;
  const entry = row(tenant, 'Signed Up', 'u', at);
  const stop = row(tenant, 'Stop', 'u', at + 950);
  await insertEventsOnce(h.db, [entry, stop]);
  await engine().handleEvents([entry]);
  // The clock is past the delay, but the exit (received at +950) is still queued: the watermark holds.
  await evaluateUpTo(at + 940);
  t.like(await run(tenant, id, 'u'), { status: 'active', step: 0 });
  await engine().handleEvents([stop]);
  await evaluateUpTo(at + 5000);
  const u = await run(tenant, id, 'u');
  t.like(u, { status: 'exited', endedAt: at + 950 });
  t.deepEqual(u.messages, []);
});

test.serial('waits for A then B: a B handled before its A still ends the second wait', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, { name: 'j', entry: { event: 'Signed Up' }, steps: [{ waitUntil: { event: 'A' } }, { waitUntil: { event: 'B' } }] });
  const at = Date.now() + 1000;
  const [entry, a, b] = [row(tenant, 'Signed Up', 'u', at), row(tenant, 'A', 'u', at + 10), row(tenant, 'B', 'u', at + 20)];
  await insertEventsOnce(h.db, [entry, a, b]);
  await engine().handleEvents([entry]);
  await evaluateUpTo(at + 5);
  await engine().handleEvents([b]);
  await engine().handleEvents([a]);
  await evaluateUpTo(at + 100);
  t.like(await run(tenant, id, 'u'), { status: 'completed', endedAt: at + 20 });
});

test.serial('one event ends one wait: two waits on the same name need two events', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, { name: 'j', entry: { event: 'Signed Up' }, steps: [{ waitUntil: { event: 'A' } }, { waitUntil: { event: 'A' } }] });
  const at = Date.now() + 1000;
  const [entry, a1, a2] = [row(tenant, 'Signed Up', 'u', at), row(tenant, 'A', 'u', at + 10), row(tenant, 'A', 'u', at + 20)];
  await insertEventsOnce(h.db, [entry, a1, a2]);
  await engine().handleEvents([entry, a1]);
  await evaluateUpTo(at + 15);
  t.like(await run(tenant, id, 'u'), { status: 'active', step: 1, waitingFor: 'A' });
  await evaluateUpTo(at + 15);
  t.like(await run(tenant, id, 'u'), { status: 'active', step: 1 }, 'evaluating again changes nothing');
  await engine().handleEvents([a2]);
  await evaluateUpTo(at + 30);
  t.like(await run(tenant, id, 'u'), { status: 'completed', endedAt: at + 20 });
});

test.serial('a goal event handled while the run waits for the watermark still converts after the run ends', async (t) => {
  const tenant = await newTenant(h);
  const id = await published(tenant, {
    name: 'j',
    entry: { event: 'Signed Up' },
    steps: [{ waitUntil: { event: 'Activated' } }, { send: { channel: 'email', template: 'x' } }],
    exitOn: ['Unsubscribed'],
    goal: { event: 'Purchased', windowMs: 60_000 },
  });
  const at = Date.now() + 1000;
  const entries = ['done', 'left'].map((u) => row(tenant, 'Signed Up', u, at));
  await insertEventsOnce(h.db, entries);
  const e = engine();
  await e.handleEvents(entries);
  await evaluateUpTo(at + 1);
  // Both runs are active when their events are handled; the watermark has passed only the
  // event that ends each run when the runs are evaluated, so the goal comes after the end.
  const later = [row(tenant, 'Activated', 'done', at + 10), row(tenant, 'Purchased', 'done', at + 20)];
  const leaving = [row(tenant, 'Unsubscribed', 'left', at + 10), row(tenant, 'Purchased', 'left', at + 20)];
  await insertEventsOnce(h.db, [...later, ...leaving]);
  await e.handleEvents([...later, ...leaving]);
  await evaluateUpTo(at + 15);
  t.like(await run(tenant, id, 'done'), { status: 'completed', endedAt: at + 10, convertedAt: null });
  t.like(await run(tenant, id, 'left'), { status: 'exited', endedAt: at + 10, convertedAt: null });
  await evaluateUpTo(at + 25);
  t.like(await run(tenant, id, 'done'), { status: 'completed', endedAt: at + 10, convertedAt: at + 20 });
  t.like(await run(tenant, id, 'left'), { status: 'exited', endedAt: at + 10, convertedAt: at + 20 });
  // A goal event handled after the run ended converts too, once, after the watermark passes it.
  const again = row(tenant, 'Purchased', 'done', at + 30);
  await insertEventsOnce(h.db, [again]);
  await e.handleEvents([again]);
  await evaluateUpTo(at + 35);
  t.like(await run(tenant, id, 'done'), { convertedAt: at + 20 });
});
