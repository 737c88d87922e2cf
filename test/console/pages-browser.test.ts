// The console's pages as an operator uses them, in Debian's chromium driven by playwright-core (no
// browser download): log in, send a Track event and an Identify call through the gateway (202,
// 200), find the event on the events page by its name, open it and read its payload, follow its
// user to the person page (traits, events); on the keys page create a key (shown once, copied
// with its button), send a Track event with it (202), revoke it through the confirmation page and
// see the gateway answer 401 to it at once; find a refused call on the refused calls page; find an
// event the worker refused on the dead letters page with why, and retry it once the cause is gone
// (stored); forget the person (typed confirmation, the request polled to succeeded: gone), and log
// out. No page asks anything of another origin. A screenshot of each page is written to
// test-results/console-pages/, or where CONSOLE_SHOTS says (CONSOLE_SHOTS=docs/images renews
// those of docs/operations.md, "Console pages").
import { launchChromium, type Browser } from '../helpers/chromium.ts';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { keySuffix } from '../../environments/api-key.ts';
import { addOperator } from '../../gateway/console/operators.ts';
import { consoleDatabase, consoleInProcess } from '../helpers/console.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const SHOTS = path.resolve(ROOT, process.env.CONSOLE_SHOTS ?? 'test-results/console-pages');
const PASSWORD = 'correct horse battery staple';
/** Refuses a processed `Poison` event, and nothing else: the worker dead-letters it (this file's own database). */
const CONSTRAINT = 'browser_poison';

let h: Harness;
let tenant: Tenant;
const opened: { close(): Promise<unknown> }[] = [];
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
let gatewayUrl: string;
let browser: Browser | undefined;

test.before(async () => {
  const url = await consoleDatabase('console_pages_browser');
  h = await openHarness({ DATABASE_URL: url, DASHBOARD_PORT: '0' });
  await dropConstraint();
  tenant = await newTenant(h);
  opened.push(await workerInProcess(h));
  const gateway = await gatewayInProcess(h);
  opened.push(gateway);
  gatewayUrl = gateway.url;
  await addOperator(h.db, 'ops-alice', 'admin', PASSWORD);
  dashboard = await consoleInProcess(h.env);
  opened.push(dashboard);
  mkdirSync(SHOTS, { recursive: true });
  browser = await launchChromium({ viewport: { width: 1280, height: 800 } });
  // The copy button writes to the clipboard, which the test reads back.
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: dashboard.url });
});

const dropConstraint = () => h.db.$executeRawUnsafe(`ALTER TABLE events DROP CONSTRAINT IF EXISTS ${CONSTRAINT}`);

test.after.always(async () => {
  await browser?.close();
  for (const o of opened.reverse()) await o.close().catch(() => {});
  await dropConstraint().catch(() => {});
  await closeEmptied(h);
});

test('an operator logs in, finds the event just sent, opens the person, creates, uses and revokes a key, retries a dead letter and forgets the person', async (t) => {
  const page = await browser!.context.newPage();
  const asked: string[] = [];
  page.on('request', (r) => asked.push(r.url()));
  const refused: string[] = [];
  page.on('console', (m) => m.type() === 'error' && /Content Security Policy|Failed to load/.test(m.text()) && refused.push(m.text()));

  // Not signed in: the events page sends the browser to the login form, which brings it back.
  await page.goto(`${dashboard.url}/console/events?env=${tenant.slug}`);
  t.regex(page.url(), /\/login\?next=/);
  await page.fill('input[name="name"]', 'ops-alice');
  await page.fill('input[name="password"]', PASSWORD);
  await Promise.all([page.waitForURL(/\/console\/events\?env=/), page.click('button[type="submit"]')]);
  t.is(await page.textContent('h1'), 'Stored events');

  // Moments later, an Identify call and a Track event through the gateway.
  const headers = { 'x-api-key': tenant.key };
  const identify = await request(gatewayUrl, `/api/identify/${tenant.slug}`, {
    headers,
    body: { userId: 'eve', messageId: 'br-i-1', traits: { email: 'eve@example.com', plan: 'team' }, timestamp: new Date().toISOString() },
  });
  t.is(identify.status, 200, identify.text);
  const messageId = `br-t-${Date.now()}`;
  const track = await request(gatewayUrl, `/api/track/${tenant.slug}`, {
    headers,
    body: trackBody({ messageId, event: 'Checkout Completed', userId: 'eve', properties: { coupon: 'SPRING-SECRET-42', total: 129.5 } }),
  });
  t.is(track.status, 202, track.text);
  t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 1, { timeoutMs: 60_000 }));

  // Found by its name, as the operator types it.
  await page.fill('input[name="event"]', 'Checkout Completed');
  await Promise.all([page.waitForURL(/event=Checkout/), page.click('form.filter button[type="submit"]')]);
  const row = page.locator('table tr', { hasText: messageId });
  await row.waitFor();
  t.regex(await row.innerText(), /processed/);
  await page.screenshot({ path: path.join(SHOTS, 'console-events.png') });

  // Its page: the stored JSON, its status and what the worker did.
  await Promise.all([page.waitForURL(/\/console\/event\?/), row.locator('a', { hasText: messageId }).click()]);
  t.is(await page.textContent('h1'), 'Event');
  const json = await page.textContent('pre.json');
  t.true(json?.includes('"coupon": "SPRING-SECRET-42"'), json ?? '');
  t.regex((await page.textContent('dl.fields')) ?? '', /processed/);
  t.regex((await page.textContent('dl.fields')) ?? '', /stored at/);
  await page.screenshot({ path: path.join(SHOTS, 'console-event.png'), fullPage: true });

  // The person, from the event's user.
  await Promise.all([page.waitForURL(/\/console\/person\?/), page.click('dl.fields a[href^="/console/person"]')]);
  t.is(await page.textContent('h1'), 'Person');
  const traits = page.locator('table', { hasText: 'last written' });
  t.regex(await traits.innerText(), /email\s+"eve@example\.com"/);
  t.regex(await traits.innerText(), /plan\s+"team"/);
  t.regex(await page.locator('body').innerText(), new RegExp(messageId));
  await page.screenshot({ path: path.join(SHOTS, 'console-person.png'), fullPage: true });

  // Keys and environments, from the navigation bar.
  await Promise.all([page.waitForURL(/\/console\/keys$/), page.click('.intake-nav a[href="/console/keys"]')]);
  await page.selectOption('select[name="org"]', tenant.slug);
  await Promise.all([page.waitForURL(/\/console\/keys\?org=/), page.click('form.filter button[type="submit"]')]);
  const keys = await page.locator('main').innerText();
  t.true(keys.includes(tenant.suffix));
  t.false(keys.includes(tenant.key));
  await page.screenshot({ path: path.join(SHOTS, 'console-keys.png'), fullPage: true });

  // A new key: shown once, copied with its button, and Track takes it.
  await Promise.all([page.waitForURL(/\/console\/keys\/create$/), page.click('form[action="/console/keys/create"] button[type="submit"]')]);
  t.is(await page.textContent('h1'), 'New key');
  const key = await page.inputValue('#new-key');
  t.regex(await page.locator('main').innerText(), /shown only now/);
  await page.click('button[data-copy="new-key"]');
  await page.locator('button[data-copy="new-key"]', { hasText: 'Copied' }).waitFor();
  t.is(await page.evaluate(() => navigator.clipboard.readText()), key);
  await page.screenshot({ path: path.join(SHOTS, 'console-key-created.png'), fullPage: true });
  const withKey = (k: string) => request(gatewayUrl, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': k }, body: trackBody({ userId: 'kim' }) });
  const used = await withKey(key);
  t.is(used.status, 202, used.text);

  // Revoked through the confirmation page: the next call with it answers 401 (every gateway dropped its cached lookup).
  await Promise.all([page.waitForURL(/\/console\/keys\?org=/), page.click('a:text("Back to the keys")')]);
  t.false((await page.locator('main').innerText()).includes(key), 'listed by its suffix only');
  const suffix = keySuffix(key);
  await Promise.all([page.waitForURL(/\/console\/keys\/revoke\?/), page.click(`a[href*="suffix=${suffix}"]`)]);
  t.is(await page.textContent('h1'), 'Revoke a key');
  t.regex(await page.locator('main').innerText(), /cannot be undone/);
  await page.screenshot({ path: path.join(SHOTS, 'console-key-revoke.png'), fullPage: true });
  await Promise.all([page.waitForURL(/\/console\/keys\?.*revoked=/), page.click(`button:text("Revoke key ${suffix}")`)]);
  t.regex(await page.locator('.flash').innerText(), new RegExp(`Key ${suffix} is revoked`));
  t.regex(await page.locator('table tr', { hasText: suffix }).innerText(), /revoked/);
  t.is((await withKey(key)).status, 401);
  t.is((await withKey(tenant.key)).status, 202, 'the other key still works');

  // A refused call, from the navigation bar: its check and the key's suffix, never the key.
  const bad = await request(gatewayUrl, `/api/track/${tenant.slug}`, { headers, body: '{"type":"track","event":"Checkout Completed","userId":"eve",' });
  t.is(bad.status, 400);
  await Promise.all([page.waitForURL(/\/console\/refused$/), page.click('.intake-nav a[href="/console/refused"]')]);
  await page.fill('input[name="env"]', tenant.slug);
  await Promise.all([page.waitForURL(/\/console\/refused\?env=/), page.click('form.filter button[type="submit"]')]);
  const refusedRow = page.locator('table tr', { hasText: bad.headers.get('x-request-id')! });
  t.true(await eventually(async () => (await refusedRow.count()) === 1 || (await page.reload(), false), { timeoutMs: 15_000 }));
  const refusedText = await refusedRow.innerText();
  t.regex(refusedText, /400\s+Invalid JSON/);
  t.true(refusedText.includes(`…${tenant.suffix}`));
  t.false((await page.locator('main').innerText()).includes(tenant.key));
  await page.screenshot({ path: path.join(SHOTS, 'console-refused.png'), fullPage: true });

  // An event the worker refuses: on the dead letters page with why; retried once the cause is gone, it is stored.
  await h.db.$executeRawUnsafe(`ALTER TABLE events ADD CONSTRAINT ${CONSTRAINT} CHECK (status <> 'processed' OR event <> 'Poison') NOT VALID`);
  const poison = `br-dl-${Date.now()}`;
  t.is(
    (await request(gatewayUrl, `/api/track/${tenant.slug}`, { headers, body: trackBody({ messageId: poison, event: 'Poison', userId: 'mallory' }) })).status,
    202,
  );
  const statusOf = async () => (await h.db.event.findFirst({ where: { environmentId: tenant.environmentId, messageId: poison } }))?.status;
  t.true(await eventually(async () => (await statusOf()) === 'failed', { timeoutMs: 60_000 }));
  await page.goto(`${dashboard.url}/console/events?${new URLSearchParams({ env: tenant.slug, status: 'failed' })}`);
  await Promise.all([page.waitForURL(/\/console\/dead-letters\?/), page.click('a:text("Dead letters (failed events, with Retry)")')]);
  const letter = page.locator('table tr', { hasText: poison });
  t.true(await eventually(async () => (await letter.count()) === 1 || (await page.reload(), false), { timeoutMs: 15_000 }));
  t.regex(await letter.innerText(), new RegExp(`mallory\\s+failed 23514: .*${CONSTRAINT}`));
  await page.screenshot({ path: path.join(SHOTS, 'console-dead-letters.png'), fullPage: true });
  await dropConstraint();
  await Promise.all([page.waitForURL(/retried=/), letter.locator('button:text("Retry")').click()]);
  t.regex(await page.locator('.flash').innerText(), new RegExp(`${poison} is being retried`));
  t.true(await eventually(async () => (await statusOf()) === 'processed', { timeoutMs: 30_000 }));
  t.like(await h.db.consoleAudit.findFirst({ where: { action: 'event.retry' } }), { operator: 'ops-alice', target: tenant.slug });

  // Forget the person: a wrong confirmation changes nothing; the right one is a request whose page
  // reloads itself until it succeeded, and the person is gone.
  await page.goto(`${dashboard.url}/console/person?${new URLSearchParams({ env: tenant.slug, user: 'eve' })}`);
  const forget = page.locator('form[action="/console/person/forget"]');
  await forget.locator('input[name="confirm"]').fill('Eve');
  await Promise.all([page.waitForURL(/\/console\/person\/forget$/), forget.locator('button[type="submit"]').click()]);
  t.regex(await page.locator('main').innerText(), /does not match the userId eve: nothing was forgotten/);
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'eve' } }), 1);
  await page.goBack();
  await forget.locator('input[name="confirm"]').fill('eve');
  await Promise.all([page.waitForURL(/\/console\/privacy-requests\//), forget.locator('button[type="submit"]').click()]);
  await page.locator('.pill.succeeded').waitFor({ timeout: 30_000 });
  t.regex(await page.locator('dl.fields').innerText(), /forget/);
  await Promise.all([page.waitForURL(/\/console\/person\?/), page.click('a:text("Back to the person")')]);
  t.regex(await page.locator('main').innerText(), /Nothing is stored of eve/);
  t.is((await request(gatewayUrl, `/api/profiles/${tenant.slug}/eve`, { method: 'GET', headers })).status, 404);

  // Log out, from the bar: the pages ask for a login again.
  await Promise.all([page.waitForURL(/\/login$/), page.click('.intake-nav form.logout button')]);
  await page.goto(`${dashboard.url}/console/events`);
  t.regex(page.url(), /\/login\?next=/);
  await page.close();

  const origin = new URL(dashboard.url).origin;
  t.deepEqual(
    asked.filter((u) => new URL(u).origin !== origin),
    [],
  );
  // Only the two pages that answer an error as they should: the wrong confirmation (422), the person gone (404).
  t.deepEqual(refused, [
    'Failed to load resource: the server responded with a status of 422 (Unprocessable Entity)',
    'Failed to load resource: the server responded with a status of 404 (Not Found)',
  ]);
});
