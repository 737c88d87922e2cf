// Journeys end to end: Track and Identify over HTTP, worker processes of `intake worker`,
// journeys managed and read back with the operator commands. Nothing here reaches into the
// engine: what a journey did is what `journey stats` and `journey runs` say.
import { execFile } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import test, { type ExecutionContext } from 'ava';
import { eventsActivity, eventsGet } from '../../cli/commands/events.ts';
import { journeyCreate, journeyList, journeyPublish, journeyRuns, journeyStatsCommand } from '../../cli/commands/journey.ts';
import { orgFeatures } from '../../cli/commands/org.ts';
import { OperatorError } from '../../operations/operator.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { acceptedTrack, appliedIdentify, request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, spawnIntake, type Child } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: { url: string; close(): Promise<void> };
let workers: Child[] = [];
let dir: string;

test.before(async () => {
  h = await openHarness({ JOURNEY_TICK_MS: '50', JOURNEY_GRACE_MS: '1000', WORKER_BATCH_WAIT_MS: '2' });
  gateway = await gatewayInProcess(h, { ownPool: true });
  // Two worker processes: every rule below must hold when runs are shared between them.
  // allSettled: if one fails to start, the other is still killed after.
  const started = await Promise.allSettled([spawnIntake('worker', h.env), spawnIntake('worker', h.env)]);
  workers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  for (const s of started) if (s.status === 'rejected') throw s.reason;
  dir = await mkdtemp(path.join(tmpdir(), 'intake-journeys-'));
});

test.after.always(async () => {
  await Promise.all(workers.map((w) => w.kill('SIGTERM')));
  await gateway?.close();
  await h?.close();
});

/** Waits and windows in the tests below: long enough for a few requests on a busy machine. */
const WAIT_MS = 8000;

type Stats = { entered: number; active: number; completed: number; exited: number; converted: number };
type Run = Awaited<ReturnType<typeof journeyRuns>>[number];

let files = 0;
async function journey(tenant: Tenant, definition: Record<string, unknown>, publish = true): Promise<string> {
  const file = path.join(dir, `j${++files}.json`);
  await writeFile(file, JSON.stringify(definition));
  const created = await journeyCreate(h.operator, [tenant.slug, '--file', file]);
  if (publish) await journeyPublish(h.operator, [tenant.slug, created.id]);
  return created.id;
}

const stats = (tenant: Tenant, id: string) => journeyStatsCommand(h.operator, [tenant.slug, id]) as Promise<Stats>;
const runs = (tenant: Tenant, id: string, user?: string) => journeyRuns(h.operator, [tenant.slug, id, ...(user ? ['--user', user] : [])]);

const track = (tenant: Tenant, body: Record<string, unknown>) => acceptedTrack(gateway.url, tenant, body);
const identify = (tenant: Tenant, body: Record<string, unknown>) => appliedIdentify(gateway.url, tenant, body);

/** Until every event of the tenant sent so far is stored (the engine runs in the same job). */
async function settled(tenant: Tenant, count: number) {
  const stored = await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) >= count);
  if (!stored) throw new Error(`fewer than ${count} events stored`);
  await eventually(async () => {
    const c = await h.operator.eventsQueue().getJobCounts('wait', 'active', 'delayed', 'prioritized');
    return Object.values(c).every((n) => n === 0);
  });
}

async function statsBecome(t: ExecutionContext, tenant: Tenant, id: string, expected: Partial<Stats>, timeoutMs = 20_000) {
  const matches = (s: Stats) => Object.entries(expected).every(([k, v]) => s[k as keyof Stats] === v);
  const last = await eventually(
    async () => {
      const s = await stats(tenant, id);
      return matches(s) ? s : null;
    },
    { timeoutMs },
  );
  if (!last) t.like(await stats(tenant, id), expected);
  else t.pass();
}

const signedUp = { name: 'Onboarding', entry: { event: 'Signed Up' }, steps: [] };

test('a published journey starts for events received after publication, not before', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, { ...signedUp, steps: [{ delay: { ms: 600_000 } }] }, false);
  await track(tenant, { userId: 'before' });
  await settled(tenant, 1);
  const published = await journeyPublish(h.operator, [tenant.slug, id]);
  t.true(typeof published.publishedAt === 'number');
  t.is((await journeyPublish(h.operator, [tenant.slug, id])).publishedAt, published.publishedAt, 'publishing again keeps the first time');

  await track(tenant, { userId: 'after' });
  await track(tenant, { userId: 'after-other-name', event: 'Signed up' });
  await settled(tenant, 3);
  await statsBecome(t, tenant, id, { entered: 1, active: 1 });
  t.deepEqual(
    (await runs(tenant, id)).map((r) => r.userId),
    ['after'],
  );
  const list = await journeyList(h.operator, [tenant.slug]);
  t.deepEqual(
    list.map((j) => [j.id, j.name, j.publishedAt]),
    [[id, 'Onboarding', published.publishedAt]],
  );
});

test('anonymous-only events and events over the journey size limits start nothing; a duplicate messageId starts once', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, signedUp);
  const anonymous = trackBody({ anonymousId: 'anon-1' });
  delete anonymous.userId;
  await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: anonymous });
  const big = await track(tenant, { userId: 'big', properties: { blob: 'x'.repeat(140 * 1024) } });
  const once = trackBody({ userId: 'dup' });
  await track(tenant, once);
  await track(tenant, once);
  await settled(tenant, 3);
  await statsBecome(t, tenant, id, { entered: 1, completed: 1 });
  await sleep(300);
  t.like(await stats(tenant, id), { entered: 1 });
  t.deepEqual(
    (await runs(tenant, id)).map((r) => r.userId),
    ['dup'],
  );
  const stored = await eventsGet(h.operator, [tenant.slug, big.json.message_id]);
  t.like(stored, { status: 'processed', drivesJourneys: false, withinLimits: false });
});

test('a corrected event with a new messageId starts the journey again only when reentry allows', async (t) => {
  const tenant = await newTenant(h);
  const once = await journey(tenant, { ...signedUp, name: 'once' });
  const again = await journey(tenant, { ...signedUp, name: 'again', reentry: true });
  await track(tenant, { userId: 'u' });
  await settled(tenant, 1);
  await statsBecome(t, tenant, again, { entered: 1, completed: 1 });
  await track(tenant, { userId: 'u' });
  await settled(tenant, 2);
  await statsBecome(t, tenant, again, { entered: 2, completed: 2 });
  t.like(await stats(tenant, once), { entered: 1, completed: 1 });
});

test('waitUntil ends when the same user sends the event, and at its timeout otherwise', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, {
    ...signedUp,
    steps: [{ waitUntil: { event: 'Activated', timeoutMs: WAIT_MS } }, { send: { channel: 'email', template: 'welcome' } }],
  });
  await track(tenant, { userId: 'quick' });
  await track(tenant, { userId: 'slow' });
  // Another user's Activated ends nobody's wait.
  await track(tenant, { userId: 'someone-else', event: 'Activated' });
  await track(tenant, { userId: 'quick', event: 'Activated' });
  await settled(tenant, 4);
  await statsBecome(t, tenant, id, { entered: 2 });
  const quick = await eventually(async () => (await runs(tenant, id, 'quick')).find((r) => r.status === 'completed'));
  t.truthy(quick, 'quick completed');
  const received = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, select: { userId: true, event: true, receivedAt: true } });
  t.true(quick!.endedAt! < quick!.enteredAt + WAIT_MS, `ended by the event, before the timeout: ${JSON.stringify({ quick, received })}`);
  t.is(quick!.messages.length, 1);

  await statsBecome(t, tenant, id, { active: 0, completed: 2 });
  const slow = (await runs(tenant, id, 'slow'))[0];
  t.is(slow.endedAt, slow.enteredAt + WAIT_MS, 'the timeout ends the wait at entry + timeoutMs');
  t.is(slow.messages.length, 1, 'the step after the wait ran once');
});

test('an event sent right behind the entry event ends the wait even when the worker sees it first', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, { ...signedUp, steps: [{ waitUntil: { event: 'Activated', timeoutMs: 600_000 } }] });
  // Activated is received right after Signed Up's 202 (so after it, by the gateway's clock);
  // two workers batching jobs may still handle the two in either order.
  await Promise.all(
    Array.from({ length: 10 }, async (_, i) => {
      await track(tenant, { userId: `racer-${i}` });
      await track(tenant, { userId: `racer-${i}`, event: 'Activated' });
    }),
  );
  await settled(tenant, 20);
  await statsBecome(t, tenant, id, { entered: 10, completed: 10, active: 0 });
});

test('exitOn ends the run; later steps do not happen', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, {
    ...signedUp,
    steps: [{ waitUntil: { event: 'Go' } }, { send: { channel: 'email', template: 'nudge' } }],
    exitOn: ['Unsubscribed'],
  });
  await track(tenant, { userId: 'leaver' });
  await track(tenant, { userId: 'stayer' });
  await settled(tenant, 2);
  await statsBecome(t, tenant, id, { entered: 2, active: 2 });
  await track(tenant, { userId: 'leaver', event: 'Unsubscribed' });
  await track(tenant, { userId: 'leaver', event: 'Go' });
  await track(tenant, { userId: 'stayer', event: 'Go' });
  await settled(tenant, 5);
  await statsBecome(t, tenant, id, { exited: 1, completed: 1, active: 0 });
  const [leaver] = await runs(tenant, id, 'leaver');
  t.is(leaver.status, 'exited');
  t.deepEqual(leaver.messages, []);
  t.is((await runs(tenant, id, 'stayer'))[0].messages.length, 1);
});

test('the goal counts a conversion once per run, inside the window only', async (t) => {
  const tenant = await newTenant(h);
  const windowMs = WAIT_MS;
  const id = await journey(tenant, { ...signedUp, steps: [{ delay: { ms: 600_000 } }], goal: { event: 'Purchased', windowMs } });
  await track(tenant, { userId: 'buyer' });
  const late = await track(tenant, { userId: 'late-buyer' });
  // Sent at once: the engine may see them before or after the entries.
  await track(tenant, { userId: 'buyer', event: 'Purchased' });
  await track(tenant, { userId: 'buyer', event: 'Purchased' });
  await statsBecome(t, tenant, id, { entered: 2, converted: 1 });
  // The window is measured from the entry event's received time, whatever the load here.
  const entered = ((await eventsGet(h.operator, [tenant.slug, late.json.message_id])) as { receivedAt: number }).receivedAt;
  await sleep(entered + windowMs + 200 - Date.now());
  await track(tenant, { userId: 'late-buyer', event: 'Purchased' });
  await settled(tenant, 5);
  await sleep(300);
  t.like(await stats(tenant, id), { entered: 2, converted: 1, active: 2 });
  t.truthy((await runs(tenant, id, 'buyer'))[0].convertedAt);
  t.is((await runs(tenant, id, 'late-buyer'))[0].convertedAt, null);
});

test('a goal sent right after the event that ends the run still converts it', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, {
    ...signedUp,
    steps: [{ waitUntil: { event: 'Activated' } }, { send: { channel: 'email', template: 'welcome' } }],
    exitOn: ['Unsubscribed'],
    goal: { event: 'Purchased', windowMs: 600_000 },
  });
  const users = ['c1', 'c2', 'c3', 'x1', 'x2'];
  for (const userId of users) await track(tenant, { userId });
  await statsBecome(t, tenant, id, { entered: 5, active: 5 });
  await Promise.all(
    users.map(async (userId) => {
      await track(tenant, { userId, event: userId.startsWith('c') ? 'Activated' : 'Unsubscribed' });
      // Long enough for a sweep to end the run before the watermark passes the goal.
      await sleep(400);
      await track(tenant, { userId, event: 'Purchased' });
    }),
  );
  await statsBecome(t, tenant, id, { completed: 3, exited: 2, converted: 5 });
});

test('attribute trigger: a change starts the journey, a no-op or duplicate Identify does not, and only with the feature', async (t) => {
  const tenant = await newTenant(h, 'attribute-trigger');
  const plan = await journey(tenant, { name: 'plan', entry: { attributeChanged: 'plan' }, steps: [], reentry: true });
  const any = await journey(tenant, { name: 'any', entry: { attributeChanged: '*' }, steps: [], reentry: true });

  await identify(tenant, { userId: 'p', messageId: 'id-1', traits: { plan: 'pro' } });
  await statsBecome(t, tenant, plan, { entered: 1 });
  await identify(tenant, { userId: 'p', messageId: 'id-1', traits: { plan: 'pro' } }); // duplicate retry
  await identify(tenant, { userId: 'p', messageId: 'id-2', traits: { plan: 'pro' } }); // changes nothing
  await identify(tenant, { userId: 'p', messageId: 'id-3', traits: { seats: 3 } }); // another trait
  await statsBecome(t, tenant, any, { entered: 2 });
  await identify(tenant, { userId: 'p', messageId: 'id-4', traits: { plan: 'enterprise' } });
  await statsBecome(t, tenant, plan, { entered: 2 });
  await sleep(500);
  t.like(await stats(tenant, plan), { entered: 2 });
  t.like(await stats(tenant, any), { entered: 3 });

  const without = await newTenant(h);
  const off = await journey(without, { name: 'plan', entry: { attributeChanged: 'plan' }, steps: [] });
  await identify(without, { userId: 'p', traits: { plan: 'pro' } });
  await sleep(800);
  t.like(await stats(without, off), { entered: 0 });
  await orgFeatures(h.operator, [without.slug, '--set', 'attribute-trigger']);
  await identify(without, { userId: 'p', traits: { plan: 'team' } });
  await statsBecome(t, without, off, { entered: 1 });
});

test('send records a message only for an address with granted, unexpired marketing consent; otherwise the reason', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, { ...signedUp, steps: [{ send: { channel: 'email', template: 'welcome' } }, { send: { channel: 'sms', template: 'hi' } }] });
  const at = new Date().toISOString();
  await identify(tenant, {
    userId: 'granted',
    traits: { email: ' Granted@Example.com ', phone: '+15550001' },
    consent: [
      { channel: 'email', status: 'granted' },
      { channel: 'sms', status: 'withdrawn' },
    ],
  });
  await identify(tenant, { userId: 'withdrawn', traits: { email: 'w@example.com' }, consent: [{ channel: 'email', status: 'withdrawn' }] });
  await identify(tenant, { userId: 'silent', traits: { email: 's@example.com' } });
  await identify(tenant, {
    userId: 'lapsed',
    traits: { email: 'l@example.com' },
    consent: [{ channel: 'email', status: 'granted', basis: 'implied_inquiry', consentedAt: Date.parse('2020-01-01T00:00:00Z') }],
  });
  await identify(tenant, { userId: 'no-email', traits: { plan: 'pro' } });
  for (const userId of ['granted', 'withdrawn', 'silent', 'lapsed', 'no-email', 'no-profile']) await track(tenant, { userId, timestamp: at });
  await settled(tenant, 6);
  await statsBecome(t, tenant, id, { entered: 6, completed: 6 });

  const byUser = Object.fromEntries((await runs(tenant, id)).map((r: Run) => [r.userId, r.messages.map((m) => [m.channel, m.status, m.reason, m.address])]));
  t.deepEqual(byUser, {
    granted: [
      ['email', 'queued', null, 'granted@example.com'],
      ['sms', 'skipped', 'consent_withdrawn', '+15550001'],
    ],
    withdrawn: [
      ['email', 'skipped', 'consent_withdrawn', 'w@example.com'],
      ['sms', 'skipped', 'no_address', null],
    ],
    silent: [
      ['email', 'skipped', 'no_consent', 's@example.com'],
      ['sms', 'skipped', 'no_address', null],
    ],
    lapsed: [
      ['email', 'skipped', 'consent_expired', 'l@example.com'],
      ['sms', 'skipped', 'no_address', null],
    ],
    'no-email': [
      ['email', 'skipped', 'no_address', null],
      ['sms', 'skipped', 'no_address', null],
    ],
    'no-profile': [
      ['email', 'skipped', 'no_profile', null],
      ['sms', 'skipped', 'no_profile', null],
    ],
  });
});

test('runs advance once per step with two workers sweeping the same timers', async (t) => {
  const tenant = await newTenant(h);
  const id = await journey(tenant, {
    ...signedUp,
    steps: [{ delay: { ms: 200 } }, { send: { channel: 'email', template: 'a' } }, { delay: { ms: 200 } }, { send: { channel: 'email', template: 'b' } }],
  });
  await Promise.all(Array.from({ length: 40 }, (_, i) => track(tenant, { userId: `many-${i}` })));
  await settled(tenant, 40);
  await statsBecome(t, tenant, id, { entered: 40, completed: 40 });
  const all = await runs(tenant, id);
  t.true(all.every((r) => r.messages.length === 2 && r.messages[0].step === 1 && r.messages[1].step === 3));
});

test('the activity list shows events whose name a published journey uses, with source track-api', async (t) => {
  const tenant = await newTenant(h);
  t.deepEqual(await eventsActivity(h.operator, [tenant.slug]), []);
  await journey(tenant, { ...signedUp, exitOn: ['Unsubscribed'] });
  await journey(tenant, { ...signedUp, entry: { event: 'Draft Only' } }, false);
  const used = await track(tenant, { userId: 'a' });
  const exit = await track(tenant, { userId: 'a', event: 'Unsubscribed' });
  await track(tenant, { userId: 'a', event: 'Page Viewed' });
  await track(tenant, { userId: 'a', event: 'Draft Only' });
  await settled(tenant, 4);
  const activity = await eventsActivity(h.operator, [tenant.slug]);
  t.deepEqual(activity.map((a) => a.messageId).sort(), [used.json.message_id, exit.json.message_id].sort());
  t.true(activity.every((a) => a.source === 'track-api' && a.status === 'processed' && a.userId === 'a'));
});

test('journey create names every bad field', async (t) => {
  const tenant = await newTenant(h);
  const file = path.join(dir, 'bad.json');
  await writeFile(
    file,
    JSON.stringify({
      name: '',
      entry: { event: 'A', attributeChanged: 'b' },
      steps: [{ send: { channel: 'fax', template: 'x' } }, { wait: 1 }],
      goal: { event: 'P' },
    }),
  );
  const err = await t.throwsAsync(journeyCreate(h.operator, [tenant.slug, '--file', file]), { instanceOf: OperatorError });
  for (const field of ['name', 'entry', 'steps[0].send.channel', 'steps[1]', 'goal.windowMs'])
    t.true(err!.message.includes(`${field}:`), `${field} in ${err!.message}`);
  await writeFile(file, '{ not json');
  await t.throwsAsync(journeyCreate(h.operator, [tenant.slug, '--file', file]), { instanceOf: OperatorError, message: /not JSON/ });
  t.deepEqual(await journeyList(h.operator, [tenant.slug]), []);
});

test('the intake command: journey create prints the unpublished journey; a bad file exits non-zero with one line on stderr', async (t) => {
  const tenant = await newTenant(h);
  const run = promisify(execFile);
  const bin = path.resolve('bin/intake.js');
  const env = { ...process.env, ...h.env };
  const file = path.join(dir, 'cli.json');
  await writeFile(file, JSON.stringify(signedUp));
  const created = JSON.parse((await run(process.execPath, [bin, 'journey', 'create', tenant.slug, '--file', file], { env })).stdout);
  t.like(created, { name: 'Onboarding', entry: { event: 'Signed Up' }, steps: [], exitOn: [], goal: null, reentry: false, publishedAt: null });
  const statsOut = JSON.parse((await run(process.execPath, [bin, 'journey', 'stats', tenant.slug, created.id], { env })).stdout);
  t.deepEqual(statsOut, { entered: 0, active: 0, completed: 0, exited: 0, converted: 0 });

  await writeFile(file, JSON.stringify({ ...signedUp, steps: [{ delay: { ms: -1 } }] }));
  const failed = await run(process.execPath, [bin, 'journey', 'create', tenant.slug, '--file', file], { env }).catch((e) => e);
  t.is(failed.code, 1);
  t.is(failed.stdout, '');
  t.regex(failed.stderr, /^intake: invalid journey: steps\[0\]\.delay\.ms: must be a whole number/);
  t.is(failed.stderr.trim().split('\n').length, 1);
});
