// The dashboard's live view in a real headless browser (Debian's chromium driven by
// playwright-core): a gateway and a worker take Track, Identify and Profiles calls and a dead
// letter; each page is loaded and what it shows is checked against what the test sent; a
// dead letter is retried with the page's button; a screenshot of each page is kept in
// test-results/live-view/. bull-board's first screen links to the pages, and neither asks
// anything of another origin. Then, with the worker stopped, queued events show as pending, read
// from their heads alone, and caller text with bidi and control characters is isolated and shown
// visibly. Read-only mode and the personal-data rule over plain HTTP; the script that finds
// queued events' heads, and the bound on what one read takes, against the real Redis.
import { launchChromium, type Browser } from '../helpers/chromium.ts';
import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Queue } from 'bullmq';
import type { Page } from 'playwright-core';
import { storedTrackPayload } from '../../events/track-payload.ts';
import { createLogger } from '../../platform/logger.ts';
import { jobIdFor } from '../../platform/queue-keys.ts';
import { createRedis } from '../../platform/redis.ts';
import { DEAD_LETTER_QUEUE } from '../../platform/queues.ts';
import { startDashboard, type Dashboard } from '../../gateway/dashboard.ts';
import { sameOrigin, seesPersonalData } from '../../gateway/live/access.ts';
import { fieldIs, KEPT_CHARS, type EventHead } from '../../gateway/live/batch-digest.ts';
import { SHOWN_CHARS } from '../../gateway/live/caller-text.ts';
import { createJobDigests } from '../../gateway/live/job-digests.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, testConfig, type Harness, type Tenant } from '../helpers/services.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHOTS = path.join(ROOT, 'test-results/live-view');
const PASSWORD = 'live view password';

let h: Harness;
let tenant: Tenant;
let worker: Awaited<ReturnType<typeof workerInProcess>> | undefined;
let board: Dashboard | undefined;
let readOnlyBoard: Dashboard | undefined;
let browser: Browser | undefined;

/** What the test sends; the pages must show exactly this. */
const sent = {
  track: [
    { messageId: 'lv-t-1', event: 'Signed Up', userId: 'ann' },
    { messageId: 'lv-t-2', event: 'Viewed Pricing', userId: 'bo' },
    { messageId: 'lv-t-3', event: 'Activated', userId: 'ann' },
  ],
  identify: [
    { userId: 'ann', messageId: 'lv-i-1', traits: { email: 'ann@example.com', plan: 'free' }, expect: 200 },
    { userId: 'ann', messageId: 'lv-i-1', traits: { email: 'ann@example.com', plan: 'free' }, expect: 200 }, // duplicate
    { userId: 'ann', messageId: 'lv-i-1', traits: { plan: 'pro' }, expect: 409 }, // conflict
    { userId: 'bo', messageId: 'lv-i-2', traits: { name: 'Bo' }, expect: 200 },
  ],
  profiles: ['ann', 'bo'],
  deadLetter: { messageId: 'lv-dl-1', event: 'Poisoned', userId: 'cy', error: '23514: new row for relation "events" violates check constraint "lv_test"' },
};

test.before(async () => {
  h = await openHarness({ DASHBOARD_PASSWORD: PASSWORD, DASHBOARD_READ_ONLY: 'false', DASHBOARD_PORT: '0' });
  tenant = await newTenant(h);
  worker = await workerInProcess(h);
  const gateway = await gatewayInProcess(h);
  const headers = { 'x-api-key': tenant.key };
  for (const e of sent.track) {
    const reply = await request(gateway.url, `/api/track/${tenant.slug}`, { headers, body: trackBody(e) });
    if (reply.status !== 202) throw new Error(`track: ${reply.status} ${reply.text}`);
  }
  for (const call of sent.identify) {
    const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, {
      headers,
      body: { ...call, expect: undefined, timestamp: '2026-01-01T10:00:00Z' },
    });
    if (reply.status !== call.expect) throw new Error(`identify: ${reply.status} ${reply.text}`);
  }
  for (const user of sent.profiles) {
    const reply = await request(gateway.url, `/api/profiles/${tenant.slug}/${user}`, { method: 'GET', headers });
    if (reply.status !== 200) throw new Error(`profiles: ${reply.status} ${reply.text}`);
  }
  // Closing the gateway writes what its live recorder holds (Identify calls, rates).
  await gateway.close();
  const dl = sent.deadLetter;
  const payload = JSON.stringify(trackBody({ messageId: dl.messageId, event: dl.event, userId: dl.userId }));
  await h.operator
    .deadLetterQueue()
    .add(
      'track',
      { event: { environmentId: tenant.environmentId, messageId: dl.messageId, receivedAt: Date.now(), timestampMs: Date.now(), payload }, error: dl.error },
      { jobId: jobIdFor(tenant.environmentId, dl.messageId) },
    );
  const stored = await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === sent.track.length, {
    timeoutMs: 60_000,
  });
  if (!stored) throw new Error('the Track events were not stored');
  const parked = await eventually(async () => (await h.operator.deadLetterQueue().getJobCounts('failed')).failed === 1, { timeoutMs: 30_000 });
  if (!parked) throw new Error('the dead letter was not parked');

  board = await startDashboard({ config: h.config, db: h.db, log: createLogger('silent', 'test-dashboard') });
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium({ httpCredentials: { username: 'admin', password: PASSWORD }, viewport: { width: 1280, height: 760 } });
});

test.after.always(async () => {
  await browser?.close();
  await board?.close();
  await readOnlyBoard?.close();
  await worker?.close();
  await closeEmptied(h);
});

const url = (p: string) => `http://127.0.0.1:${board!.port}${p}`;

async function open(p: string, shot: string): Promise<Page> {
  const page = await browser!.context.newPage();
  const response = await page.goto(url(p), { waitUntil: 'load' });
  if (!response || response.status() !== 200) throw new Error(`${p}: ${response?.status()}`);
  const file = path.join(SHOTS, `${shot}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return page;
}

/** The page's table as text cells, row by row (the header row left out). */
async function rows(page: Page): Promise<string[][]> {
  return page.$$eval('table tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => (td.textContent ?? '').trim())));
}

test.serial('events: every event sent, with its name, messageId, user and status; filtered by userId and by messageId', async (t) => {
  const page = await open(`/live/events?env=${tenant.slug}&refresh=0`, 'events');
  t.log(`screenshot: ${path.relative(ROOT, path.join(SHOTS, 'events.png'))}`);
  const shown = await rows(page);
  for (const e of sent.track) {
    const row = shown.find((r) => r[2] === e.messageId);
    t.truthy(row, `${e.messageId} is listed`);
    t.deepEqual(row!.slice(1), [e.event, e.messageId, e.userId, 'processed']);
  }
  // Newest first.
  t.deepEqual(
    shown.filter((r) => r[2].startsWith('lv-t-')).map((r) => r[2]),
    ['lv-t-3', 'lv-t-2', 'lv-t-1'],
  );

  await page.selectOption('select[name=by]', 'userId');
  await page.fill('input[name=q]', 'ann');
  await Promise.all([page.waitForURL(/q=ann/), page.click('button[type=submit]')]);
  t.deepEqual((await rows(page)).map((r) => r[2]).sort(), ['lv-t-1', 'lv-t-3']);

  await page.goto(url(`/live/events?env=${tenant.slug}&by=messageId&q=lv-t-2&refresh=0`));
  t.deepEqual(
    (await rows(page)).map((r) => r[2]),
    ['lv-t-2'],
  );
  await page.close();
});

test.serial('Identify calls: user, applied / duplicate / conflict, and the names of the traits each changed', async (t) => {
  const page = await open(`/live/identify?env=${tenant.slug}&refresh=0`, 'identify');
  const shown = (await rows(page)).map((r) => r.slice(1));
  // Newest first: bo's call, ann's conflict, ann's duplicate, ann's first call.
  t.deepEqual(shown, [
    ['bo', 'lv-i-2', 'applied', 'name'],
    ['ann', 'lv-i-1', 'conflict', ''],
    ['ann', 'lv-i-1', 'duplicate', ''],
    ['ann', 'lv-i-1', 'applied', 'email, plan'],
  ]);
  await page.close();
});

test.serial('rates: the answers of each API in the last hour, plotted and counted', async (t) => {
  const page = await open('/live/rates?refresh=0', 'rates');
  const count = (route: string, column: number) => page.textContent(`[data-route="${route}"][data-column="${column}"]`);
  t.is(await count('track', 2), String(sent.track.length));
  t.is(await count('identify', 2), String(sent.identify.length));
  t.is(await count('identify', 3), '1', 'the 409');
  t.is(await count('profiles', 2), String(sent.profiles.length));
  for (const route of ['track', 'identify', 'profiles']) {
    const d = await page.getAttribute(`path[data-series="${route}"]`, 'd');
    t.regex(d ?? '', /^M[\d.]+,[\d.]+(L[\d.]+,[\d.]+){59}$/, `${route}: a line of 60 minutes`);
  }
  await page.close();
});

test.serial('dead letters: the refused event and why; Retry sends it through the worker, which stores it', async (t) => {
  const page = await open('/live/dead-letters?refresh=0', 'dead-letters');
  const dl = sent.deadLetter;
  const [row] = await rows(page);
  t.deepEqual(row.slice(1, 6), [tenant.slug, dl.event, dl.messageId, dl.userId, dl.error]);
  await Promise.all([page.waitForURL(/retried=/), page.click('button:has-text("Retry")')]);
  t.regex((await page.textContent('.flash')) ?? '', new RegExp(`${dl.messageId} is being retried`));
  const stored = await eventually(
    async () => (await h.db.event.findFirst({ where: { environmentId: tenant.environmentId, messageId: dl.messageId } }))?.status,
    {
      timeoutMs: 30_000,
    },
  );
  t.is(stored, 'processed');
  await page.goto(url(`/live/events?env=${tenant.slug}&by=messageId&q=${dl.messageId}&refresh=0`));
  t.deepEqual((await rows(page))[0]?.slice(1), [dl.event, dl.messageId, dl.userId, 'processed']);
  await page.close();
});

test.serial("bull-board's first screen links to the live view and back; no page asks anything of another origin", async (t) => {
  const page = await browser!.context.newPage();
  const asked: string[] = [];
  const refused: string[] = [];
  page.on('request', (r) => asked.push(r.url()));
  // A Content-Security-Policy refusal is logged, not requested: a page that still names another host shows here.
  page.on('console', (m) => m.type() === 'error' && /Content Security Policy|Failed to load/.test(m.text()) && refused.push(m.text()));

  await page.goto(url('/'), { waitUntil: 'load' });
  // bull-board's app has run under the policy: it lists the queues it read from the API.
  await page.locator('#bull-board-sidebar').getByText('events-dead-letter').waitFor();
  await page.screenshot({ path: path.join(SHOTS, 'queues.png') });
  const live = page.locator('nav.intake-nav a[href="/live/events"]');
  t.true(await live.isVisible(), 'no menu to open first');
  // click() waits until nothing covers the link.
  await Promise.all([page.waitForURL(url('/live/events')), live.click()]);
  t.is(await page.textContent('h1'), 'Events');
  t.deepEqual(await page.$$eval('.intake-nav a', (links) => links.map((a) => [a.textContent, a.getAttribute('href')])), [
    ['Events', '/live/events'],
    ['Identify calls', '/live/identify'],
    ['Rates', '/live/rates'],
    ['Dead letters', '/live/dead-letters'],
    ['Stored events', '/console/events'],
    ['Refused calls', '/console/refused'],
    ['Person', '/console/person'],
    ['Keys', '/console/keys'],
    ['Queues', '/'],
  ]);
  // The page reloads itself (its script is allowed by its hash), and links back to the queues.
  await page.waitForRequest(url('/live/events'), { timeout: 15_000 });
  await page.waitForLoadState('load');
  await Promise.all([page.waitForURL(url('/')), page.click('.intake-nav a[href="/"]')]);
  await page.locator('#bull-board-sidebar').getByText('events-dead-letter').waitFor();
  for (const p of ['/live/identify', '/live/rates', '/live/dead-letters', `/queue/${DEAD_LETTER_QUEUE}`]) {
    await page.goto(url(p), { waitUntil: 'networkidle' });
  }
  await page.close();

  const origin = new URL(url('/')).origin;
  t.true(asked.length > 10, asked.join('\n'));
  t.deepEqual(
    asked.filter((u) => new URL(u).origin !== origin),
    [],
  );
  t.deepEqual(refused, []);
});

test.serial('read-only (the default): no Retry button, and a retry POST is refused', async (t) => {
  readOnlyBoard = await startDashboard({
    config: testConfig({ ...h.env, DASHBOARD_PORT: '0', DASHBOARD_READ_ONLY: 'true' }),
    db: h.db,
    log: createLogger('silent', 'test-dashboard'),
  });
  const base = `http://127.0.0.1:${readOnlyBoard.port}`;
  const auth = { authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString('base64')}` };
  const listing = await request(base, '/live/dead-letters?refresh=0', { method: 'GET', headers: auth });
  t.is(listing.status, 200);
  t.notRegex(listing.text, /<button type="submit">Retry<\/button>/);
  t.regex(listing.text, /Read-only/);
  const post = await request(base, '/live/dead-letters/retry', {
    headers: { ...auth, origin: base, 'content-type': 'application/x-www-form-urlencoded' },
    body: `env=${tenant.environmentId}&messageId=${sent.deadLetter.messageId}`,
  });
  t.is(post.status, 405);
  // Behind the same basic auth as bull-board.
  t.is((await request(base, '/live/events', { method: 'GET' })).status, 401);
});

test.serial('queued events show as pending from their heads alone; caller text is isolated, its controls shown and never sent', async (t) => {
  // No worker from here on: what is sent stays queued.
  await worker?.close();
  worker = undefined;
  const other = await newTenant(h);
  const gateway = await gatewayInProcess(h);
  const headers = { 'x-api-key': other.key };
  const longId = `lv-long-${'x'.repeat(3000)}`;
  const events = [
    { messageId: 'lv-p-1', event: 'Opened\u0000Box', userId: null, anonymousId: 'anon\u202eymous', properties: { note: '{"environmentId":"not an event"}' } },
    { messageId: 'lv-p-2\u0007', event: 'שלום', userId: 'ann', properties: { blob: 'y'.repeat(300_000) } },
    { messageId: longId, event: 'Long\u0085', userId: 'bo' },
  ];
  const replies = await Promise.all(events.map((e) => request(gateway.url, `/api/track/${other.slug}`, { headers, body: trackBody(e) })));
  t.deepEqual(
    replies.map((r) => r.status),
    [202, 202, 202],
  );
  const identify = await request(gateway.url, `/api/identify/${other.slug}`, {
    headers,
    body: { userId: 'cy', messageId: 'lv-i-rlo', timestamp: '2026-01-01T10:00:00Z', traits: { 'pl\u202ean': 'pro', אימייל: 'cy@example.com' } },
  });
  t.is(identify.status, 200);
  await gateway.close();

  const auth = { authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString('base64')}` };
  const raw = await request(url(''), `/live/events?env=${other.slug}&refresh=0`, { method: 'GET', headers: auth });
  t.is(raw.status, 200);
  t.notRegex(raw.text, /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/, 'no control or bidi character is sent as itself');

  const page = await open(`/live/events?env=${other.slug}&refresh=0`, 'caller-text');
  const shown = await rows(page);
  const shortLong = `${longId.slice(0, SHOWN_CHARS)}…`;
  t.deepEqual(shown.find((r) => r[2] === 'lv-p-1')?.slice(1), ['Opened\\u0000Box', 'lv-p-1', 'anon\\u202Eymous (anonymous)', 'pending']);
  t.deepEqual(shown.find((r) => r[2] === 'lv-p-2\\u0007')?.slice(1), ['שלום', 'lv-p-2\\u0007', 'ann', 'pending']);
  t.deepEqual(shown.find((r) => r[2] === shortLong)?.slice(1), ['Long\\u0085', shortLong, 'bo', 'pending']);
  t.is(shown.length, 3);
  // Each cell of caller text holds it in an isolate; each control is marked.
  const isolation = await page.$$eval('tbody tr', (trs) =>
    trs.map((tr) => [...tr.querySelectorAll('td')].slice(1, 4).map((td) => [...td.querySelectorAll('bdi')].map((b) => getComputedStyle(b).unicodeBidi))),
  );
  for (const cells of isolation) t.deepEqual(cells, [['isolate'], ['isolate'], ['isolate']]);
  t.deepEqual((await page.$$eval('.ctl', (marks) => marks.map((m) => m.textContent))).sort(), ['\\u0000', '\\u0007', '\\u0085', '\\u202E']);
  // As laid out: "(anonymous)" reads left to right, its "(" left of its ")".
  const inOrder = await page.$$eval('td .note', (notes) =>
    notes
      .filter((n) => n.textContent === '(anonymous)')
      .map((n) =>
        // The left edge of "(" and of ")" (no named function here: the page runs this as written).
        [0, 10].map((i) => {
          const range = document.createRange();
          range.setStart(n.firstChild!, i);
          range.setEnd(n.firstChild!, i + 1);
          return range.getBoundingClientRect().left;
        }),
      )
      .map(([open, close]) => open < close),
  );
  t.deepEqual(inOrder, [true]);

  await page.goto(url(`/live/events?env=${other.slug}&by=messageId&q=${encodeURIComponent(longId)}&refresh=0`));
  t.deepEqual(
    (await rows(page)).map((r) => r.slice(2)),
    [[shortLong, 'bo', 'pending']],
    'a messageId longer than a page keeps is found whole',
  );
  await page.goto(url(`/live/events?env=${other.slug}&by=userId&q=ann&refresh=0`));
  t.deepEqual(
    (await rows(page)).map((r) => r[2]),
    ['lv-p-2\\u0007'],
  );

  await page.goto(url(`/live/identify?env=${other.slug}&refresh=0`));
  const traits = await page.$$eval('tbody tr td:nth-child(5) bdi', (bdis) => bdis.map((b) => b.textContent));
  t.deepEqual(traits.sort(), ['pl\\u202Ean', 'אימייל'].sort());
  await page.close();
});

const DIGEST_ENV = '0b8f2c4e-1111-4222-8333-444455556666';
const OTHER_ENV = '0b8f2c4e-1111-4222-8333-777788889999';

/** A queue of the test's own (no worker takes its jobs) on a connection of its own. */
function digestQueue(t: { teardown(fn: () => Promise<void>): void }) {
  const redis = createRedis({ redisUrl: h.config.redisUrl }, 'worker');
  const queue = new Queue(`live-digest-${randomBytes(3).toString('hex')}`, { connection: redis, prefix: h.config.queuePrefix });
  t.teardown(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    redis.disconnect();
  });
  return { redis, queue };
}

/** A queued event as the gateway writes it (handlers/track.ts): its fields in that order, the payload as stored. */
function queuedEvent(environmentId: string, body: Record<string, unknown>, receivedAt: number) {
  return { environmentId, messageId: body.messageId as string, receivedAt, timestampMs: receivedAt, payload: storedTrackPayload(body) };
}

test("the script finds every event's head in Redis, whatever the values and properties hold", async (t) => {
  const { redis, queue } = digestQueue(t);
  const longUser = 'u'.repeat(KEPT_CHARS + 500);
  const bodies = [
    trackBody({ messageId: 'd-1', event: 'Plain', userId: 'ann' }),
    trackBody({ messageId: 'd-2,"payload":"x', event: ',\\"properties\\":{', userId: null, anonymousId: '{"environmentId":"' }),
    trackBody({
      messageId: 'd-3\\"',
      event: 'q"\\',
      userId: longUser,
      properties: { environmentId: OTHER_ENV, nested: { environmentId: 'x', payload: 'y', properties: {} } },
    }),
    trackBody({ messageId: 'd-4', event: 'nul\u0000rlo\u202elone\ud800', userId: 'מיכל', context: { big: 'z'.repeat(200_000) } }),
    trackBody({ messageId: 'd-5', event: 'Other env', userId: 'bo' }),
  ];
  const events = bodies.map((b, i) => queuedEvent(i === 4 ? OTHER_ENV : DIGEST_ENV, b, 1_000 + i));
  await queue.add('track (4 events)', { events: events.slice(0, 4) }, { timestamp: 1_000 });
  await queue.add('track (1 event)', { events: events.slice(4) }, { timestamp: 1_004 });
  await queue.add('dead letter', { event: events[1], error: 'refused' }, { timestamp: 900 });
  await queue.add('another form', { events: [{ messageId: 'x', payload: '{"userId":"y"}' }] }, { timestamp: 800 });
  await queue.add(
    'hand-made payload',
    { events: [{ environmentId: DIGEST_ENV, messageId: 'h-1', receivedAt: 1, timestampMs: 1, payload: '{"userId":"hand"}' }] },
    { timestamp: 700 },
  );

  const digests = createJobDigests({ redis, bytesPerRead: 64 * 1_048_576, cacheBytes: 1_048_576 });
  const { jobs, unread } = await digests.list(queue, ['waiting'], 100);
  t.deepEqual(unread, { jobs: 0, bytes: 0 });
  t.deepEqual(
    jobs.map((j) => j.timestamp),
    [1_004, 1_000, 900, 800, 700],
    'newest first',
  );
  const plain = (head: EventHead) => ({
    environmentId: head.environmentId,
    messageId: head.messageId.value,
    receivedAt: head.receivedAt,
    event: head.event.value,
    userId: head.userId?.value ?? null,
    anonymousId: head.anonymousId?.value ?? null,
  });
  const expected = (i: number) => ({
    environmentId: events[i].environmentId,
    messageId: bodies[i].messageId,
    receivedAt: events[i].receivedAt,
    event: bodies[i].event,
    userId: i === 2 ? longUser.slice(0, KEPT_CHARS) : (bodies[i].userId ?? null),
    anonymousId: bodies[i].anonymousId ?? null,
  });
  t.deepEqual(jobs[0].heads!.map(plain), [expected(4)]);
  t.deepEqual(jobs[1].heads!.map(plain), [0, 1, 2, 3].map(expected));
  t.deepEqual(jobs[2].heads!.map(plain), [expected(1)], 'a dead letter holds an event of the same form');
  t.deepEqual(jobs[3].heads, [], 'no event of the form: nothing to show');
  t.like(jobs[4].heads![0], { environmentId: DIGEST_ENV, messageId: { value: 'h-1', whole: true }, userId: { value: 'hand', whole: true } });
  t.true(fieldIs(jobs[1].heads![2].userId, longUser), 'a cut value is found by its whole value');
  t.false(fieldIs(jobs[1].heads![2].userId, longUser.slice(0, -1)));
});

test('one read goes through at most its bytes of jobs, newest first; what it read is not read again until the job changes', async (t) => {
  const { redis, queue } = digestQueue(t);
  for (let i = 0; i < 6; i++) {
    const body = trackBody({ messageId: `b-${i}`, properties: { blob: 'p'.repeat(200_000) } });
    await queue.add('track (1 event)', { events: [queuedEvent(DIGEST_ENV, body, 2_000 + i)] }, { timestamp: 2_000 + i });
  }
  const digests = createJobDigests({ redis, bytesPerRead: 450_000, cacheBytes: 1_048_576 });
  // Counts the script's calls: the only reads of job data.
  const calls: string[] = [];
  const client = redis as unknown as { liveEventHeads(key: string): Promise<string[]> };
  const script = client.liveEventHeads.bind(redis);
  client.liveEventHeads = (key) => (calls.push(key), script(key));

  const readOnce = async () => {
    const { jobs, unread } = await digests.list(queue, ['waiting'], 100);
    return { read: jobs.filter((j) => j.heads).map((j) => j.heads![0].messageId.value), unread: unread.jobs };
  };
  t.deepEqual(await readOnce(), { read: ['b-5', 'b-4'], unread: 4 });
  t.is(calls.length, 2);
  t.deepEqual(await readOnce(), { read: ['b-5', 'b-4', 'b-3', 'b-2'], unread: 2 });
  t.deepEqual(await readOnce(), { read: ['b-5', 'b-4', 'b-3', 'b-2', 'b-1', 'b-0'], unread: 0 });
  t.is(calls.length, 6);
  await readOnce();
  t.is(calls.length, 6, 'every head kept: metadata only');

  // An erasure rewrites a job's data: it is read again.
  const [newest] = await queue.getJobs(['waiting'], 0, 0);
  await newest.updateData({ events: [queuedEvent(DIGEST_ENV, trackBody({ messageId: 'b-5-kept' }), 2_005)] });
  t.deepEqual((await readOnce()).read, ['b-5-kept', 'b-4', 'b-3', 'b-2', 'b-1', 'b-0']);
  t.is(calls.length, 7);
});

test('a retry POST from another site is refused (basic-auth credentials go along by themselves)', async (t) => {
  const auth = { authorization: `Basic ${Buffer.from(`admin:${PASSWORD}`).toString('base64')}` };
  const form = { 'content-type': 'application/x-www-form-urlencoded' };
  const body = `env=${tenant.environmentId}&messageId=nothing`;
  t.is((await request(url(''), '/live/dead-letters/retry', { headers: { ...auth, ...form, origin: 'https://evil.example' }, body })).status, 403);
  t.is((await request(url(''), '/live/dead-letters/retry', { headers: { ...auth, ...form, 'sec-fetch-site': 'cross-site' }, body })).status, 403);
  t.is((await request(url(''), '/live/dead-letters/retry', { headers: { ...auth, ...form }, body })).status, 403, 'no Origin at all');
});

test('personal data only to a signed-in viewer; a retry form only from this origin', (t) => {
  t.true(seesPersonalData({ dashboardPassword: 'x' }));
  t.false(seesPersonalData({ dashboardPassword: '' }), 'no password: nobody is signed in');
  t.true(sameOrigin({ 'sec-fetch-site': 'same-origin' }));
  t.false(sameOrigin({ 'sec-fetch-site': 'same-site' }));
  t.true(sameOrigin({ origin: 'http://127.0.0.1:3001', host: '127.0.0.1:3001' }));
  t.false(sameOrigin({ origin: 'http://127.0.0.1:3002', host: '127.0.0.1:3001' }));
});
