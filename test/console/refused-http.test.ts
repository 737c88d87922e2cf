// The console's Refused calls page over real HTTP, with a real gateway, PostgreSQL and Redis: bad
// calls of several kinds show with their check, status and key suffix (never the key nor its
// hash), under their environment or, refused before one was known, in the list of their own; an
// admin sees the bodies (cut), a read-only operator none; accepted calls leave nothing; a flood
// of 10,000 bad calls leaves bounded lists; intake users forget removes the calls whose body
// names the person.
import http from 'node:http';
import test from 'ava';
import { usersForget } from '../../cli/commands/users.ts';
import { hashApiKey } from '../../environments/api-key.ts';
import { addOperator } from '../../gateway/console/operators.ts';
import { REFUSED_UNKNOWN, refusedCallsKey } from '../../platform/live-keys.ts';
import { createRedis, type Redis } from '../../platform/redis.ts';
import { call, consoleDatabase, consoleInProcess, logInAs, type Login } from '../helpers/console.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, testConfig, type Harness, type Tenant } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
const html = { accept: 'text/html' };
/** Kept per list in this file: small, so a flood fills it. */
const KEPT = 50;

let h: Harness;
let redis: Redis;
let gateway: InProcessGateway;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
let admin: Login;
let viewer: Login;

test.before(async () => {
  const url = await consoleDatabase('console_refused');
  h = await openHarness({ DATABASE_URL: url, DASHBOARD_PORT: '0', REFUSED_CALLS_KEPT: String(KEPT), REFUSED_CALLS_PER_SECOND: '1000' });
  redis = createRedis(h.config, 'worker');
  gateway = await gatewayInProcess(h);
  dashboard = await consoleInProcess(h.env);
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  await addOperator(h.db, 'rex', 'read-only', PASSWORD);
  admin = await logInAs(dashboard.url, 'ada', PASSWORD);
  viewer = await logInAs(dashboard.url, 'rex', PASSWORD);
});

test.after.always(async () => {
  await gateway?.close();
  await dashboard?.close();
  if (redis) {
    const keys = await redis.keys(`${h.config.queuePrefix}:live:refused:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  }
  await closeEmptied(h);
});

const key = (listId: string) => refusedCallsKey(h.config.queuePrefix, listId);
const page = (login: Login, path: string) => call(dashboard.url, path, { headers: { ...html, cookie: login.cookie } });
/** The page's rows: each row's cells' HTML. */
const rows = (text: string) =>
  [...text.matchAll(/<tr>(.*?)<\/tr>/gs)].map((m) => [...m[1].matchAll(/<td>(.*?)<\/td>/gs)].map((c) => c[1])).filter((cells) => cells.length > 0);
/** The part of the page above the calls refused before an environment was known. */
const ownPart = (text: string) => text.split('<h2>Refused before the environment was known</h2>')[0];
const unknownPart = (text: string) => text.split('<h2>Refused before the environment was known</h2>')[1] ?? '';

test.serial('bad calls of several kinds show with their check, status and key suffix; an admin sees the bodies, a read-only operator none', async (t) => {
  const tenant = await newTenant(h);
  const fakeKey = `itk_${'Z'.repeat(35)}fak3Q`;
  const secretBody = '{"type":"track","event":"Oops","userId":"refused-ann","properties":{"card":"4111"},';
  const track = (headers: Record<string, string>, body: unknown = trackBody()) => request(gateway.url, `/api/track/${tenant.slug}`, { headers, body });
  const answers = [
    await track({}), // 401 Missing API key: before the environment is known
    await track({ 'x-api-key': fakeKey }), // 401 Invalid API key: before it too
    await track({ 'x-api-key': tenant.key, 'x-service-environment': 'production' }), // 403 at check 3: before it too
    await track({ 'x-api-key': tenant.key, 'x-service-environment': 'staging' }), // 403 at check 5: the key's environment is known
    await track({ 'x-api-key': tenant.key }, secretBody), // 400 Invalid JSON
    await track({ 'x-api-key': tenant.key }, trackBody({ event: undefined, userId: 'refused-bo' })), // 400 of validation
    await request(gateway.url, `/api/identify/${tenant.slug}`, {
      headers: { 'x-api-key': tenant.key },
      body: { type: 'identify', userId: 'refused-cy', traits: 5 },
    }),
  ];
  t.deepEqual(
    answers.map((a) => a.status),
    [401, 401, 403, 403, 400, 400, 400],
  );
  const badSlug = await request(gateway.url, '/api/track/No%20Such%20Slug!', { headers: { 'x-api-key': tenant.key }, body: trackBody() });
  t.is(badSlug.status, 400);

  await eventually(async () => (await redis.llen(key(tenant.environmentId))) === 4, { timeoutMs: 10_000 });
  await eventually(async () => (await redis.llen(key(REFUSED_UNKNOWN))) >= 4, { timeoutMs: 10_000 });

  const path = `/console/refused?env=${tenant.slug}`;
  const seen = await page(admin, path);
  t.is(seen.status, 200, seen.text);
  t.true(seen.text.includes('<a href="/console/refused" class="on" aria-current="page">Refused calls</a>'));
  // Never a key, never its hash: the suffix only.
  for (const secret of [tenant.key, fakeKey, hashApiKey(tenant.key), hashApiKey(fakeKey)]) t.false(seen.text.includes(secret));
  const own = rows(ownPart(seen.text));
  t.is(own.length, 4, seen.text);
  // Newest first: the Identify refusal, then validation, invalid JSON, the environment binding's 403.
  t.deepEqual(
    own.map((r) => [r[1], r[2].replace(/<[^>]*>/g, '')]),
    [
      ['identify', '400'],
      ['track', '400'],
      ['track', '400'],
      ['track', '403'],
    ],
  );
  t.regex(own[0][3], /Invalid Identify call: traits/);
  t.regex(own[2][3], /Invalid JSON/);
  t.regex(own[3][3], /Forbidden/);
  for (const r of own) t.true(r[5].includes(`…${tenant.suffix}`), r[5]);
  t.true(own.every((r, i) => r[6].includes(answers[6 - i].headers.get('x-request-id')!)));
  // The admin sees the bodies, escaped, and the error answered.
  t.true(own[2][7].includes('refused-ann'), own[2][7]);
  t.true(own[2][7].includes('&quot;card&quot;'));
  t.true(own[1][7].includes('refused-bo'));
  t.true(own[3][7].includes('not read'));
  t.true(own[0][4].includes('issues'));

  const early = rows(unknownPart(seen.text));
  t.deepEqual(
    early.map((r) => [r[2].replace(/<[^>]*>/g, ''), r[3].replace(/<[^>]*>/g, ''), r[5].replace(/<[^>]*>/g, '')]),
    [
      ['403', 'Forbidden', `…${tenant.suffix}`],
      ['401', 'Invalid API key', '…fak3Q'],
      ['401', 'Missing API key', 'none'],
    ],
  );
  // The bad path value is not this environment's: it is on the list of every call refused before an environment was known.
  const all = await page(admin, '/console/refused');
  t.true(all.text.includes('No Such Slug!'), all.text);

  // A read-only operator: checks, statuses and suffixes, never a body nor a text that may quote the caller.
  const hidden = await page(viewer, path);
  t.is(hidden.status, 200);
  for (const secret of ['refused-ann', 'refused-bo', 'refused-cy', '4111', tenant.key, fakeKey]) t.false(hidden.text.includes(secret), secret);
  const viewed = rows(ownPart(hidden.text));
  t.is(viewed.length, 4);
  t.regex(viewed[0][3], /Invalid Identify call: <span class="hidden">hidden<\/span>/);
  t.regex(viewed[1][3], /hidden/);
  t.regex(viewed[2][3], /Invalid JSON/);
  t.regex(viewed[2][7], /hidden/);
  t.true(viewed[2][5].includes(`…${tenant.suffix}`));
  t.regex(hidden.text, /a read-only operator sees no personal data/);

  // Without a session: nothing.
  t.is((await call(dashboard.url, path)).status, 401);

  // intake users forget removes the calls whose body names the person, and no other.
  const summary = await usersForget(h.operator, [tenant.slug, 'refused-ann']);
  t.true((summary.liveViewEntries ?? 0) >= 1);
  const after = rows(ownPart((await page(admin, path)).text));
  t.is(after.length, 3);
  t.false(after.some((r) => r.join('').includes('refused-ann')));
});

test.serial('accepted calls leave nothing', async (t) => {
  const tenant = await newTenant(h);
  const before = await redis.llen(key(REFUSED_UNKNOWN));
  const track = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() });
  t.is(track.status, 202);
  const identify = await request(gateway.url, `/api/identify/${tenant.slug}`, {
    headers: { 'x-api-key': tenant.key },
    body: { type: 'identify', userId: 'accepted-1', traits: { plan: 'pro' } },
  });
  t.is(identify.status, 200, identify.text);
  // Two writes' time.
  await sleep(2500);
  t.is(await redis.exists(key(tenant.environmentId)), 0);
  t.is(await redis.llen(key(REFUSED_UNKNOWN)), before);
  const seen = await page(admin, `/console/refused?env=${tenant.slug}`);
  t.regex(seen.text, /No refused call recorded in this environment/);
});

/** `count` POSTs of `body` with `headers` over a few keep-alive connections; the statuses counted. */
async function flood(url: string, path: string, headers: Record<string, string>, body: string, count: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const statuses = new Map<number, number>();
  let sent = 0;
  const one = () =>
    new Promise<void>((resolve, reject) => {
      const req = http.request(
        {
          agent,
          host: '127.0.0.1',
          port: new URL(url).port,
          method: 'POST',
          path,
          headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          res.resume();
          res.on('end', () => {
            statuses.set(res.statusCode ?? 0, (statuses.get(res.statusCode ?? 0) ?? 0) + 1);
            resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  const worker = async () => {
    while (sent < count) {
      sent++;
      await one();
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  agent.destroy();
  return statuses;
}

test.serial('a flood of 10,000 bad calls leaves each list bounded', async (t) => {
  const tenant = await newTenant(h);
  const bad = `{"type":"track","userId":"flood","properties":{"pad":"${'x'.repeat(4000)}"}`;
  const statuses = await flood(gateway.url, `/api/track/${tenant.slug}`, { 'x-api-key': tenant.key }, bad, 5000);
  const unknown = await flood(gateway.url, `/api/track/${tenant.slug}`, { 'x-api-key': `itk_${'Q'.repeat(40)}` }, bad, 5000);
  t.is(statuses.get(400), 5000);
  t.is(unknown.get(401), 5000);
  await sleep(1500);
  // Trimmed to REFUSED_CALLS_KEPT, bodies cut: a bounded list whatever came.
  t.is(await redis.llen(key(tenant.environmentId)), KEPT);
  t.true((await redis.llen(key(REFUSED_UNKNOWN))) <= KEPT);
  const bytes = Number(await redis.call('MEMORY', 'USAGE', key(tenant.environmentId)));
  t.true(bytes < KEPT * 6 * 1024, `${bytes} bytes`);
  // The flood leaves the in-process dashboard's event loop busy for a moment: an answer other than
  // 200 is logged and the page asked again (twice at most); its rows are judged on the 200.
  let seen = await page(admin, `/console/refused?env=${tenant.slug}`);
  for (let attempt = 1; seen.status !== 200 && attempt < 3; attempt++) {
    t.log(`attempt ${attempt}: ${seen.status} ${seen.text.slice(0, 300)}`);
    await sleep(1000);
    seen = await page(admin, `/console/refused?env=${tenant.slug}`);
  }
  t.is(seen.status, 200, seen.text.slice(0, 500));
  t.is(rows(ownPart(seen.text)).length, KEPT, seen.text.slice(0, 1500));
  t.regex(seen.text, /first 2048 of 4\d{3} characters/);
});

test.serial('sampled: a gateway keeping at most 5 refused calls a second per environment writes no more through a flood', async (t) => {
  const bad = `{"type":"track","userId":"flood","properties":{"pad":"${'x'.repeat(4000)}"}`;
  const sampled = { ...h, config: testConfig({ ...h.env, REFUSED_CALLS_KEPT: '200', REFUSED_CALLS_PER_SECOND: '5' }) };
  const slow = await gatewayInProcess(sampled);
  const other = await newTenant(h);
  const started = Date.now();
  try {
    await flood(slow.url, `/api/track/${other.slug}`, { 'x-api-key': other.key }, bad, 4000);
  } finally {
    await slow.close();
  }
  const seconds = Math.ceil((Date.now() - started) / 1000) + 1;
  const kept = await redis.llen(key(other.environmentId));
  t.true(kept > 0 && kept <= 5 * seconds, `${kept} kept in ${seconds} s`);
});
