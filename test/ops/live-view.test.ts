// The dashboard's live view in a real headless browser (Debian's chromium driven by
// playwright-core): a gateway and a worker take Track, Identify and Profiles calls and a dead
// letter; each page is loaded and what it shows is checked against what the test sent; a
// dead letter is retried with the page's button; a screenshot of each page is kept in
// test-results/live-view/. Read-only mode and the personal-data rule over plain HTTP.
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createLogger } from '../../common/logger.ts';
import { jobIdFor } from '../../common/queue-keys.ts';
import { startDashboard, type Dashboard } from '../../gateway/dashboard.ts';
import { sameOrigin, seesPersonalData } from '../../gateway/live/access.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, testConfig, type Harness, type Tenant } from '../helpers/services.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHOTS = path.join(ROOT, 'test-results/live-view');
const CHROMIUM = process.env.TEST_CHROMIUM ?? '/usr/bin/chromium';
const PASSWORD = 'live view password';

let h: Harness;
let tenant: Tenant;
let worker: Awaited<ReturnType<typeof workerInProcess>> | undefined;
let board: Dashboard | undefined;
let readOnlyBoard: Dashboard | undefined;
let browser: BrowserContext | undefined;
let profileDir: string;

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
  profileDir = mkdtempSync(path.join(tmpdir(), 'intake-chromium-'));
  browser = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    httpCredentials: { username: 'admin', password: PASSWORD },
    viewport: { width: 1280, height: 760 },
  });
});

test.after.always(async () => {
  await browser?.close();
  if (profileDir) rmSync(profileDir, { recursive: true, force: true });
  await board?.close();
  await readOnlyBoard?.close();
  await worker?.close();
  await closeEmptied(h);
});

const url = (p: string) => `http://127.0.0.1:${board!.port}${p}`;

async function open(p: string, shot: string): Promise<Page> {
  const page = await browser!.newPage();
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
