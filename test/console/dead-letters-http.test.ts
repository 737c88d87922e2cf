// The console's dead letters over real HTTP, beside a real gateway and worker: an event the worker
// refuses (a CHECK constraint of this file's own database stands in for any refusal of its data)
// is listed on /console/dead-letters with why; an admin's Retry, once the cause is gone, has the
// worker store it (processed) and writes the audit record with the operator's name. A read-only
// operator sees the dead letter without its user or refusal, no Retry, and its POST is refused.
// The live view's Retry, pressed by a signed-in operator, is audited the same way.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { jobIdFor } from '../../platform/queue-keys.ts';
import { call, consoleDatabase, consoleInProcess, logInAs, type Login } from '../helpers/console.ts';
import { eventually } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
const CONSTRAINT = 'console_poison';
const SECRET = 'only-the-payload-holds-this';
const poison = { messageId: `dl-${Date.now()}`, event: 'Poison', userId: 'dl-user', properties: { secret: SECRET } };
/** Retried from the live view's button by a signed-in operator. */
const poisonLive = { ...poison, messageId: `${poison.messageId}-live` };

let h: Harness;
let tenant: Tenant;
const opened: { close(): Promise<unknown> }[] = [];
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;

const dropConstraint = () => h.db.$executeRawUnsafe(`ALTER TABLE events DROP CONSTRAINT IF EXISTS ${CONSTRAINT}`);

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await consoleDatabase('console_dead_letters'), DASHBOARD_PORT: '0' });
  await dropConstraint();
  tenant = await newTenant(h);
  // Refuses a processed `Poison` event and nothing else (the failed row is still recorded). NOT VALID: earlier runs' rows are not checked.
  await h.db.$executeRawUnsafe(`ALTER TABLE events ADD CONSTRAINT ${CONSTRAINT} CHECK (status <> 'processed' OR event <> 'Poison') NOT VALID`);
  opened.push(await workerInProcess(h));
  const gateway = await gatewayInProcess(h);
  opened.push(gateway);
  for (const event of [poison, poisonLive]) {
    const sent = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody(event) });
    if (sent.status !== 202) throw new Error(`track: ${sent.status} ${sent.text}`);
    const parked = await eventually(
      async () => {
        const job = await h.operator.deadLetterQueue().getJob(jobIdFor(tenant.environmentId, event.messageId));
        return job !== undefined && (await job.getState()) === 'failed';
      },
      { timeoutMs: 60_000 },
    );
    if (!parked) throw new Error('the worker did not dead-letter the event');
  }
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  await addOperator(h.db, 'rita', 'read-only', PASSWORD);
  dashboard = await consoleInProcess(h.env);
  opened.push(dashboard);
});

test.after.always(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => {});
  await dropConstraint().catch(() => {});
  await closeEmptied(h);
});

const page = (login?: Login) => ({ headers: { accept: 'text/html', ...(login ? { cookie: login.cookie } : {}) } });
const lettersPath = () => `/console/dead-letters?env=${tenant.slug}`;
const retry = (login: Login, fields: Record<string, string>) =>
  call(dashboard.url, '/console/dead-letters/retry', {
    method: 'POST',
    headers: { accept: 'text/html', cookie: login.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: login.csrfToken, ...fields }).toString(),
  });

test.serial('without a session: the page sends a browser to the login, and a retry is 401', async (t) => {
  const browser = await call(dashboard.url, lettersPath(), page());
  t.is(browser.status, 303);
  t.is(browser.headers.get('location'), `/login?next=${encodeURIComponent(lettersPath())}`);
  const post = await call(dashboard.url, '/console/dead-letters/retry', { method: 'POST', body: { env: tenant.slug, job: 'x' } });
  t.is(post.status, 401);
});

test.serial('a read-only operator sees the dead letter without its user or refusal, no Retry, and a retry POST is 403', async (t) => {
  const rita = await logInAs(dashboard.url, 'rita', PASSWORD);
  const listed = await call(dashboard.url, lettersPath(), page(rita));
  t.is(listed.status, 200);
  t.true(listed.text.includes(poison.messageId), 'the messageId (no personal data)');
  t.true(listed.text.includes('<span class="pill failed">failed</span> <span class="hidden">hidden</span>'), 'why: hidden');
  for (const personal of [poison.userId, SECRET, '23514', CONSTRAINT]) t.false(listed.text.includes(personal), personal);
  t.notRegex(listed.text, /Retry<\/button>/);
  t.regex(listed.text, /Retrying needs an admin operator/);
  const job = jobIdFor(tenant.environmentId, poison.messageId);
  const refused = await retry(rita, { env: tenant.slug, job });
  t.is(refused.status, 403);
  t.is(await (await h.operator.deadLetterQueue().getJob(job))!.getState(), 'failed', 'not retried');
  t.is(await h.db.consoleAudit.count({ where: { action: 'event.retry' } }), 0);
});

test.serial('an admin sees the refused event and why; Retry has the worker store it, audited with the operator name', async (t) => {
  const ada = await logInAs(dashboard.url, 'ada', PASSWORD);
  const listed = await call(dashboard.url, lettersPath(), page(ada));
  t.is(listed.status, 200);
  const row = listed.text.split('<tr>').find((r) => r.includes(`>${poison.messageId}<`)) ?? '';
  t.true(row.includes(`<bdi class="mono">${poison.userId}</bdi>`), row);
  t.regex(row, new RegExp(`<span class="pill failed">failed</span> <bdi>23514: [^<]*${CONSTRAINT}`), 'why: PostgreSQL’s refusal');
  const job = jobIdFor(tenant.environmentId, poison.messageId);
  t.true(
    row.includes(
      `<input type="hidden" name="job" value="${job}"><input type="hidden" name="_csrf" value="${ada.csrfToken}"><button type="submit">Retry</button>`,
    ),
    row,
  );
  // The events page links to it, and lists the stored row as failed.
  const events = await call(dashboard.url, `/console/events?env=${tenant.slug}&status=failed`, page(ada));
  t.true(events.text.includes(`href="/console/dead-letters?env=${tenant.slug}"`));
  t.true(events.text.includes(poison.messageId));

  // Without the CSRF token: refused by the gate, nothing retried.
  const noToken = await call(dashboard.url, '/console/dead-letters/retry', {
    method: 'POST',
    headers: { cookie: ada.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ env: tenant.slug, job }).toString(),
  });
  t.is(noToken.status, 403);

  // The cause is fixed, then retried.
  await dropConstraint();
  const retried = await retry(ada, { env: tenant.slug, job });
  t.is(retried.status, 303, retried.text);
  t.is(retried.headers.get('location'), `/console/dead-letters?env=${tenant.slug}&retried=${poison.messageId}`);
  const stored = await eventually(
    async () => (await h.db.event.findFirst({ where: { environmentId: tenant.environmentId, messageId: poison.messageId } }))?.status === 'processed',
    { timeoutMs: 30_000 },
  );
  t.true(stored, 'the worker stored it: processed');
  t.true(await eventually(async () => (await (await h.operator.deadLetterQueue().getJob(job))?.getState()) === 'completed'), 'its dead-letter job done');
  const audit = await h.db.consoleAudit.findMany({ where: { action: 'event.retry' } });
  t.is(audit.length, 1);
  t.like(audit[0], { operator: 'ada', target: tenant.slug });
  t.deepEqual(JSON.parse(audit[0].detail), { messageId: poison.messageId, job });

  const after = await call(dashboard.url, `${lettersPath()}&retried=${poison.messageId}`, page(ada));
  t.regex(after.text, /is being retried/);
  t.false(after.text.includes(`id=${poison.messageId}"`), 'no longer listed (the flash names it)');
  t.true(after.text.includes(`id=${poisonLive.messageId}"`), 'the other dead letter still is');
  // Nothing failed is left: a second retry changes nothing and says so.
  const again = await retry(ada, { env: tenant.slug, job });
  t.is(again.status, 409);
  t.is(await h.db.consoleAudit.count({ where: { action: 'event.retry' } }), 1);
  // Another environment's path value does not reach this environment's dead letter.
  t.is((await retry(ada, { env: 'no-such-env', job })).status, 404);
});

test.serial("the live view's Retry, by a signed-in operator, is audited the same way", async (t) => {
  // The live view's button needs a writable dashboard, which needs a password.
  const writable = await consoleInProcess({ ...h.env, DASHBOARD_PASSWORD: 'a dashboard password', DASHBOARD_READ_ONLY: 'false' });
  t.teardown(() => writable.close());
  const ada = await logInAs(writable.url, 'ada', PASSWORD);
  const job = jobIdFor(tenant.environmentId, poisonLive.messageId);
  const retried = await call(writable.url, '/live/dead-letters/retry', {
    method: 'POST',
    headers: { cookie: ada.cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
    body: new URLSearchParams({ job, _csrf: ada.csrfToken }).toString(),
  });
  t.is(retried.status, 303, retried.text);
  const stored = await eventually(
    async () => (await h.db.event.findFirst({ where: { environmentId: tenant.environmentId, messageId: poisonLive.messageId } }))?.status === 'processed',
    { timeoutMs: 30_000 },
  );
  t.true(stored);
  const audit = await h.db.consoleAudit.findFirst({ where: { action: 'event.retry', detail: { contains: poisonLive.messageId } } });
  t.like(audit, { operator: 'ada', target: tenant.slug });
});
