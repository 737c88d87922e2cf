// Operators' login to the dashboard over real HTTP: with no operator the dashboard is what it
// was (no login); once one exists every page needs a session, set by POST /login as an
// HttpOnly, SameSite=Strict cookie (Secure off loopback), every change needs the session's CSRF
// token and an admin, logins are limited per name and per address, and a session ends at logout
// or when its operator is removed.
import os from 'node:os';
import test from 'ava';
import { Queue } from 'bullmq';
import { HIDDEN_JOB_DATA } from '../../gateway/dashboard.ts';
import { seesPersonalData } from '../../gateway/live/access.ts';
import { EVENTS_QUEUE } from '../../platform/queues.ts';
import { createRedis } from '../../platform/redis.ts';
import { addOperator } from '../../gateway/console/operators.ts';
import { createDb, type Db } from '../../platform/db.ts';
import { call, consoleDatabase, consoleInProcess, logInAs } from '../helpers/console.ts';
import { testConfig, testEnv } from '../helpers/services.ts';
import { intake } from '../security/cli.ts';

const PASSWORD = 'correct horse battery staple';
let env: Record<string, string>;
let db: Db;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
const opened: { close(): Promise<unknown> }[] = [];

test.before(async () => {
  env = testEnv({ DATABASE_URL: await consoleDatabase('console_auth') });
  db = createDb(testConfig(env));
  dashboard = await consoleInProcess(env);
  opened.push(dashboard);
});
test.after.always(async () => {
  for (const o of opened.reverse()) await o.close().catch(() => {});
  await db?.$disconnect();
});

const html = { accept: 'text/html' };

test.serial('with no operator the dashboard opens without a login, and the admin API answers 401', async (t) => {
  t.is((await call(dashboard.url, '/', { headers: html })).status, 200);
  t.is((await call(dashboard.url, '/live/events', { headers: html })).status, 200);
  t.is((await call(dashboard.url, '/api/queues')).status, 200);
  t.false((await call(dashboard.url, '/', { headers: html })).text.includes('intake-csrf'), 'no session, no token');
  const admin = await call(dashboard.url, '/admin/api/v1/me');
  t.is(admin.status, 401);
  t.deepEqual(admin.json, { error: 'Unauthorized' });
  // The login page is there, and no name and password opens anything.
  t.regex((await call(dashboard.url, '/login', { headers: html })).text, /<form method="post" action="\/login">/);
  t.is((await call(dashboard.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name: 'x', password: 'y' } })).status, 401);
});

test.serial('once an operator exists, every page needs a session: a browser is sent to the login page, anything else gets 401', async (t) => {
  await addOperator(db, 'alice', 'admin', PASSWORD);
  await addOperator(db, 'viewer', 'read-only', PASSWORD);
  const page = await call(dashboard.url, '/live/events?env=x', { headers: html });
  t.is(page.status, 303);
  t.is(page.headers.get('location'), '/login?next=%2Flive%2Fevents%3Fenv%3Dx');
  for (const path of ['/', '/live/events', '/api/queues', '/live/rates']) t.is((await call(dashboard.url, path)).status, 401, path);
  // Open as before: probes and the icon.
  for (const path of ['/healthz', '/favicon.svg']) t.is((await call(dashboard.url, path)).status, 200, path);
  // Basic auth is no way in any more.
  const basic = { authorization: `Basic ${Buffer.from(`alice:${PASSWORD}`).toString('base64')}` };
  t.is((await call(dashboard.url, '/api/queues', { headers: basic })).status, 401);
});

test.serial('login: a wrong password is refused; the right one sets an HttpOnly, SameSite=Strict cookie (not Secure on loopback HTTP)', async (t) => {
  const wrong = await call(dashboard.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name: 'alice', password: 'nope' } });
  t.is(wrong.status, 401);
  t.deepEqual(wrong.json, { error: 'Wrong name or password' });
  t.is(wrong.headers.get('set-cookie'), null);
  const unknown = await call(dashboard.url, '/login', {
    method: 'POST',
    headers: { accept: 'application/json' },
    body: { name: 'mallory', password: PASSWORD },
  });
  t.is(unknown.status, 401);
  t.deepEqual(unknown.json, wrong.json, 'an unknown name reads as a wrong password');

  const login = await logInAs(dashboard.url, 'alice', PASSWORD);
  t.regex(login.setCookie, /^intake_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200$/);
  const stored = await db.operatorSession.findMany();
  t.is(stored.length, 1);
  t.false(stored[0].idHash.includes(login.cookie.split('=')[1]), 'only the hash of the session id is stored');
  for (const path of ['/', '/live/events', '/api/queues']) t.is((await call(dashboard.url, path, { headers: { cookie: login.cookie } })).status, 200, path);
  // bull-board's page carries the session's CSRF token and the script that sends it with bull-board's changes.
  const board = await call(dashboard.url, '/', { headers: { cookie: login.cookie, accept: 'text/html' } });
  t.true(board.text.includes(`<meta name="intake-csrf" content="${login.csrfToken}"><script src="/console/csrf.js"></script>`));
  const script = await call(dashboard.url, '/console/csrf.js');
  t.is(script.status, 200);
  t.regex(script.headers.get('content-type') ?? '', /^application\/javascript/);
  t.regex(script.text, /X-CSRF-Token/);
  const me = await call(dashboard.url, '/admin/api/v1/me', { headers: { cookie: login.cookie } });
  t.deepEqual(me.json, { name: 'alice', role: 'admin', csrfToken: login.csrfToken });

  // Behind a TLS proxy on this host (which reaches the dashboard on loopback), Secure as well.
  const proxied = await call(dashboard.url, '/login', {
    method: 'POST',
    headers: { accept: 'application/json', 'x-forwarded-proto': 'https' },
    body: { name: 'alice', password: PASSWORD },
  });
  t.regex(proxied.headers.get('set-cookie') ?? '', /^__Host-intake_session=[A-Za-z0-9_-]{43}; .*; Secure$/);

  // The login form: a 303 to where the browser was going (a path of this dashboard only).
  const form = (next: string) =>
    call(dashboard.url, '/login', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
      body: new URLSearchParams({ name: 'alice', password: PASSWORD, next }).toString(),
    });
  const viaForm = await form('/live/rates');
  t.is(viaForm.status, 303);
  t.is(viaForm.headers.get('location'), '/live/rates');
  t.is((await form('//evil.example/')).headers.get('location'), '/');
  // A login form posted from another site is refused.
  const crossSite = await call(dashboard.url, '/login', {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json', origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
    body: { name: 'alice', password: PASSWORD },
  });
  t.is(crossSite.status, 403);
});

test.serial("every change needs the session's CSRF token; a read-only operator changes nothing", async (t) => {
  const alice = await logInAs(dashboard.url, 'alice', PASSWORD);
  const retry = (headers: Record<string, string>, form: Record<string, string>) =>
    call(dashboard.url, '/live/dead-letters/retry', {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin', ...headers },
      body: new URLSearchParams(form).toString(),
    });
  t.is((await retry({ cookie: alice.cookie }, { job: 'j1' })).status, 403);
  t.is((await retry({ cookie: alice.cookie }, { job: 'j1', _csrf: 'x'.repeat(43) })).status, 403);
  const other = await logInAs(dashboard.url, 'alice', PASSWORD);
  t.is((await retry({ cookie: alice.cookie }, { job: 'j1', _csrf: other.csrfToken })).status, 403, "another session's token");
  // With its token the request passes the gate: the live view answers (read-only dashboard: 405).
  const passed = await retry({ cookie: alice.cookie }, { job: 'j1', _csrf: alice.csrfToken });
  t.is(passed.status, 405);
  t.regex(passed.text, /read-only \(DASHBOARD_READ_ONLY\)/);
  // bull-board's API too: the header carries the token.
  const pause = `/api/queues/dead-letters/pause`;
  t.is((await call(dashboard.url, pause, { method: 'PUT', headers: { cookie: alice.cookie } })).status, 403);
  t.not((await call(dashboard.url, pause, { method: 'PUT', headers: { cookie: alice.cookie, 'x-csrf-token': alice.csrfToken } })).status, 403);

  const viewer = await logInAs(dashboard.url, 'viewer', PASSWORD);
  t.is((await call(dashboard.url, '/live/events', { headers: { cookie: viewer.cookie } })).status, 200);
  const refused = await retry({ cookie: viewer.cookie }, { job: 'j1', _csrf: viewer.csrfToken });
  t.is(refused.status, 403);
  t.deepEqual(refused.json, { error: 'Forbidden: a read-only operator changes nothing' });
});

test.serial('logout needs the CSRF token and ends the session', async (t) => {
  const login = await logInAs(dashboard.url, 'alice', PASSWORD);
  t.is((await call(dashboard.url, '/logout', { method: 'POST', headers: { cookie: login.cookie } })).status, 403);
  const out = await call(dashboard.url, '/logout', {
    method: 'POST',
    headers: { cookie: login.cookie, 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
    body: `_csrf=${login.csrfToken}`,
  });
  t.is(out.status, 303);
  t.is(out.headers.get('location'), '/login');
  t.regex(out.headers.get('set-cookie') ?? '', /^intake_session=; .*Max-Age=0/);
  t.is((await call(dashboard.url, '/api/queues', { headers: { cookie: login.cookie } })).status, 401);
  t.is((await call(dashboard.url, '/admin/api/v1/me', { headers: { cookie: login.cookie } })).status, 401);
});

test.serial('failed logins are limited per name: past 5, even the right password waits', async (t) => {
  await addOperator(db, 'bob', 'admin', PASSWORD);
  const attempt = (password: string) =>
    call(dashboard.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name: 'bob', password } });
  for (let i = 0; i < 5; i++) t.is((await attempt(`wrong ${i}`)).status, 401);
  const limited = await attempt(PASSWORD);
  t.is(limited.status, 429);
  t.true(Number(limited.headers.get('retry-after')) > 800);
  // Another name from the same address is not held back by bob's failures.
  t.is(
    (await call(dashboard.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name: 'alice', password: PASSWORD } })).status,
    200,
  );
});

test.serial('failed logins are limited per address, whatever the names', async (t) => {
  // Counts of its own (they are kept in Redis under the queue prefix): the failures above are not its.
  const limited = await consoleInProcess({ ...env, QUEUE_PREFIX: testEnv().QUEUE_PREFIX }, { loginLimits: { perAddress: 3 } });
  opened.push(limited);
  const attempt = (name: string, password: string) =>
    call(limited.url, '/login', { method: 'POST', headers: { accept: 'application/json' }, body: { name, password } });
  for (const name of ['n1', 'n2', 'n3']) t.is((await attempt(name, 'wrong password')).status, 401);
  t.is((await attempt('alice', PASSWORD)).status, 429);
});

test.serial('removing an operator ends its sessions and its tokens at once', async (t) => {
  await addOperator(db, 'carol', 'admin', PASSWORD);
  const login = await logInAs(dashboard.url, 'carol', PASSWORD);
  const token = await intake(env, ['operator', 'token', 'carol']);
  const bearer = { authorization: `Bearer ${JSON.parse(token.stdout).token}` };
  t.is((await call(dashboard.url, '/admin/api/v1/me', { headers: bearer })).status, 200);
  t.is((await call(dashboard.url, '/api/queues', { headers: { cookie: login.cookie } })).status, 200);
  const removed = await intake(env, ['operator', 'remove', 'carol']);
  t.like(JSON.parse(removed.stdout), { removed: true, sessionsRevoked: 1, tokensRevoked: 1 });
  t.is((await call(dashboard.url, '/api/queues', { headers: { cookie: login.cookie } })).status, 401);
  t.is((await call(dashboard.url, '/admin/api/v1/me', { headers: bearer })).status, 401);
  t.is((await call(dashboard.url, '/admin/api/v1/me', { headers: { cookie: login.cookie } })).status, 401);
});

const outside = Object.values(os.networkInterfaces())
  .flat()
  .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;

(outside ? test.serial : test.serial.skip)('reached on an address other than loopback, the cookie is Secure and __Host- bound', async (t) => {
  const open = await consoleInProcess({ ...env, DASHBOARD_HOST: '0.0.0.0', DASHBOARD_PASSWORD: 'a password for the test' });
  opened.push(open);
  const url = `http://${outside}:${open.port}`;
  const login = await logInAs(url, 'alice', PASSWORD);
  t.regex(login.setCookie, /^__Host-intake_session=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Strict; Max-Age=43200; Secure$/);
  // A client that keeps it (over HTTPS, through a proxy) sends it back under that name.
  t.is((await call(url, '/api/queues', { headers: { cookie: login.cookie } })).status, 200);
});

test.serial('job data and personal data: admins see them, read-only operators never do', async (t) => {
  const config = testConfig(env);
  const connection = createRedis(config, 'worker');
  const queue = new Queue(EVENTS_QUEUE, { connection, prefix: config.queuePrefix });
  opened.push({ close: async () => (await queue.obliterate({ force: true }), await queue.close(), connection.disconnect()) });
  await queue.add('track (1 event)', { events: [{ messageId: 'm-secret', payload: '{"userId":"secret-user"}' }] }, { jobId: 'personal-1' });
  await addOperator(db, 'reader', 'read-only', PASSWORD).catch(() => {});
  const jobsSeenBy = async (login: { cookie: string }) => {
    const res = await call(dashboard.url, `/api/queues?activeQueue=${EVENTS_QUEUE}&status=waiting`, { headers: { cookie: login.cookie } });
    t.is(res.status, 200);
    return JSON.stringify(res.json.queues.find((q: { name: string }) => q.name === EVENTS_QUEUE).jobs);
  };
  const admin = await jobsSeenBy(await logInAs(dashboard.url, 'alice', PASSWORD));
  t.true(admin.includes('secret-user'), admin);
  const reader = await jobsSeenBy(await logInAs(dashboard.url, 'reader', PASSWORD));
  t.false(reader.includes('secret-user'), reader);
  t.true(reader.includes(HIDDEN_JOB_DATA));
  t.true(seesPersonalData({ dashboardPassword: '' }, { operator: { role: 'admin' } }));
  t.false(seesPersonalData({ dashboardPassword: 'x' }, { operator: { role: 'read-only' } }));
});
