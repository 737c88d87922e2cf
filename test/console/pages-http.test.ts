// The console's pages over real HTTP against the real PostgreSQL and Redis: stored events
// (filters, keyset pages that show every event exactly once whatever the ties in time), one
// event (its JSON, status, size-limit flag, the journey runs it started), a person (traits with
// their write times, joined IDs, addresses and consent, events, runs and messages) and the keys
// page (suffixes, never a key or its hash). With no operator and no password they hide personal
// data as the live view does; once an operator exists each answers only with a session, and a
// read-only operator sees no personal data. The statements' plans use the events' indexes.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { CONSOLE_PAGES } from '../../gateway/console/pages/index.ts';
import { insertEventsOnce, type EventRow } from '../../events/event-store.ts';
import { formatEventKey, searchEvents, searchStatement, type EventSearch, type ListedEvent } from '../../events/event-search.ts';
import { createPartitionsFor } from '../../events/storage.ts';
import { poolOf } from '../../platform/db.ts';
import { hashStored } from '../../platform/identity-hash.ts';
import { userHashOf } from '../../profiles/person.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { call, consoleDatabase, consoleInProcess, logInAs, type Login } from '../helpers/console.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
const SECRET = 'a-property-only-the-payload-holds';
const html = { accept: 'text/html' };

let h: Harness;
let tenant: Tenant;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
/** Every stored event of the tenant, newest first by (received_at, id), as the pages must list them. */
let all: { messageId: string; event: string; userId: string | null; anonymousId: string | null; status: string }[] = [];
const BASE = Date.now() - 3_600_000;

test.before(async () => {
  const url = await consoleDatabase('console_pages');
  h = await openHarness({ DATABASE_URL: url, DASHBOARD_PORT: '0' });
  tenant = await newTenant(h);
  await createPartitionsFor(poolOf(h.db), BASE - 86_400_000, Date.now() + 86_400_000);
  // 90 events; three at a time share their received millisecond (ties the key must break).
  const rows: EventRow[] = [];
  for (let i = 0; i < 90; i++) {
    const userId = i % 3 === 0 ? 'ann' : i % 3 === 1 ? 'bo' : null;
    const messageId = `pg-${String(i).padStart(3, '0')}`;
    const event = i % 5 === 0 ? 'Signed Up' : 'Viewed Page';
    const payload = { type: 'track', messageId, event, userId, anonymousId: userId ? null : `anon-${i}`, properties: { secret: SECRET, i } };
    rows.push({
      environmentId: tenant.environmentId,
      messageId,
      event,
      userId,
      anonymousId: userId ? null : `anon-${i}`,
      timestampMs: BASE + Math.floor(i / 3) * 1000,
      receivedAt: BASE + Math.floor(i / 3) * 1000,
      payload: JSON.stringify(payload),
      status: i === 7 ? 'failed' : 'processed',
      withinLimits: i !== 10,
      limitReason: i === 10 ? 'properties over the journey size limit' : null,
      drivesJourneys: i === 0,
      error: i === 7 ? '23514: refused by a check' : null,
    });
  }
  // In several batches, so the ids do not follow the messageIds within a millisecond.
  for (const part of [rows.filter((_, i) => i % 2 === 1), rows.filter((_, i) => i % 2 === 0)]) await insertEventsOnce(h.db, part);
  const stored = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, orderBy: [{ receivedAt: 'desc' }, { id: 'desc' }] });
  all = stored.map((e) => ({ messageId: e.messageId, event: e.event, userId: e.userId, anonymousId: e.anonymousId, status: e.status }));

  // A person: a profile of two joined user IDs, a claimed address with a consent decision, a journey run started by pg-000 with a message.
  const profile = await h.db.profile.create({
    data: {
      environmentId: tenant.environmentId,
      fields: JSON.stringify({ email: 'ann@example.com', plan: 'pro' }),
      traitTimes: JSON.stringify({ email: BASE, plan: BASE + 5000 }),
      email: 'ann@example.com',
      updatedAt: new Date(BASE + 5000),
    },
  });
  for (const userId of ['ann', 'ann-old'])
    await h.db.profileUser.create({ data: { environmentId: tenant.environmentId, userId, userHash: userHashOf(userId), profileId: profile.id } });
  await h.db.addressClaim.create({ data: { profileId: profile.id, channel: 'email', value: 'ann@example.com', at: BigInt(BASE) } });
  await h.db.consentDecision.create({
    data: {
      environmentId: tenant.environmentId,
      channel: 'email',
      purpose: 'marketing',
      address: 'ann@example.com',
      addressHash: hashStored('ann@example.com'),
      status: 'granted',
      basis: 'consent',
      source: 'signup-form',
      decidedAt: BigInt(BASE),
      expiresAt: BigInt(BASE + 365 * 86_400_000),
    },
  });
  const journey = await h.db.journey.create({
    data: { environmentId: tenant.environmentId, name: 'Welcome series', definition: '{}', eventNames: ['Signed Up'], publishedAt: new Date(BASE - 1000) },
  });
  const run = await h.db.journeyRun.create({
    data: {
      journeyId: journey.id,
      environmentId: tenant.environmentId,
      userId: 'ann',
      userHash: userHashOf('ann'),
      triggerKey: 'e:pg-000',
      triggerHash: hashStored('e:pg-000'),
      status: 'active',
      step: 1,
      stepStartedAt: BigInt(BASE),
      enteredAt: BigInt(BASE),
    },
  });
  await h.db.journeyMessage.create({
    data: { runId: run.id, journeyId: journey.id, step: 0, channel: 'email', template: 'welcome-1', address: 'ann@example.com', status: 'queued' },
  });
  dashboard = await consoleInProcess(h.env);
});

test.after.always(async () => {
  await dashboard?.close();
  await closeEmptied(h);
});

const env = () => tenant.slug;
const q = (values: Record<string, string>) => `?${new URLSearchParams(values)}`;

/** The messageIds a page lists, in order (the links to each event's page). */
function listed(text: string): string[] {
  const stored = text.split('<h2>Stored</h2>')[1] ?? '';
  return [...stored.matchAll(/<a href="\/console\/event\?[^"]*"><bdi class="mono">([^<]*)<\/bdi><\/a>/g)].map((m) => m[1]);
}

/** Every page of a search, following the pages' own "Older" links. */
async function everyPage(path: string, headers: Record<string, string>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let next: string | undefined = path;
  let pages = 0;
  while (next) {
    const page = await call(dashboard.url, next, { headers });
    if (page.status !== 200) throw new Error(`${next}: ${page.status}`);
    ids.push(...listed(page.text));
    pages++;
    next = /<a href="([^"]*)" rel="next">/.exec(page.text)?.[1]?.replaceAll('&amp;', '&');
    if (pages > 50) throw new Error('no end');
  }
  return { ids, pages };
}

test.serial('with no operator and no password: the pages answer and hide personal data', async (t) => {
  const events = await call(dashboard.url, `/console/events${q({ env: env() })}`, { headers: html });
  t.is(events.status, 200);
  t.regex(events.text, /<title>intake · Stored events<\/title>/);
  t.deepEqual(
    listed(events.text),
    all.slice(0, 50).map((e) => e.messageId),
  );
  t.false(events.text.includes('>ann<'), 'no user ID');
  t.true(events.text.includes('<span class="hidden">hidden</span>'));
  // The navigation bar is the live view's and bull-board's, with the console's pages.
  for (const link of ['/live/events', '/live/dead-letters', '/console/events', '/console/person', '/console/keys', '/'])
    t.true(events.text.includes(`<a href="${link}"`), link);

  const one = await call(dashboard.url, `/console/event${q({ env: env(), id: 'pg-000' })}`, { headers: html });
  t.is(one.status, 200);
  t.true(one.text.includes('Signed Up'));
  t.false(one.text.includes(SECRET), 'no payload');
  t.false(one.text.includes('>ann<'));

  const byUser = await call(dashboard.url, `/console/events${q({ env: env(), by: 'userId', who: 'ann' })}`, { headers: html });
  t.is(byUser.status, 403);
  t.false(byUser.text.includes('pg-000'));
  const person = await call(dashboard.url, `/console/person${q({ env: env(), user: 'ann' })}`, { headers: html });
  t.is(person.status, 403);
  t.false(person.text.includes('ann@example.com'));

  const keys = await call(dashboard.url, `/console/keys${q({ org: tenant.slug })}`, { headers: html });
  t.is(keys.status, 200);
  t.true(keys.text.includes(`>${tenant.suffix}<`));
  const stored = await h.db.apiKey.findFirstOrThrow({ where: { environmentId: tenant.environmentId } });
  t.false(keys.text.includes(tenant.key), 'never the key');
  t.false(keys.text.includes(stored.hash), 'never its hash');
  // The organizations to choose from name each.
  t.true((await call(dashboard.url, '/console/keys', { headers: html })).text.includes(`<option value="${tenant.slug}"`));
  // No forms of change for a viewer who is not an admin operator.
  t.false(keys.text.includes('method="post"'));
});

test.serial('an event sent through the gateway and not stored yet (no worker runs) shows as pending; caller text is escaped', async (t) => {
  const gateway = await gatewayInProcess(h);
  const messageId = `pending-${Date.now()}`;
  const event = '<img src=x onerror=alert(1)>';
  try {
    const reply = await request(gateway.url, `/api/track/${tenant.slug}`, {
      headers: { 'x-api-key': tenant.key },
      body: trackBody({ messageId, event, userId: 'queued-user', properties: { note: '</pre><script>alert(2)</script>' } }),
    });
    t.is(reply.status, 202, reply.text);
  } finally {
    await gateway.close();
  }
  const page = await call(dashboard.url, `/console/events${q({ env: env() })}`, { headers: html });
  const queued = page.text.split('<h2>Queued (pending)</h2>')[1]?.split('<h2>Stored</h2>')[0] ?? '';
  t.true(queued.includes(messageId), page.text);
  t.true(queued.includes('<span class="pill pending">pending</span>'));
  t.true(queued.includes('&lt;img src=x onerror=alert(1)&gt;'));
  t.false(page.text.includes('<img src=x'));
  // Only the queued ones, by status; and by name.
  const pending = await call(dashboard.url, `/console/events${q({ env: env(), status: 'pending', event })}`, { headers: html });
  t.true(pending.text.includes(messageId));
  t.false(pending.text.includes('<h2>Stored</h2>'));
  const none = await call(dashboard.url, `/console/events${q({ env: env(), status: 'pending', event: 'Signed Up' })}`, { headers: html });
  t.false(none.text.includes(messageId));
  // Its page says it is queued.
  const one = await call(dashboard.url, `/console/event${q({ env: env(), id: messageId })}`, { headers: html });
  t.is(one.status, 200);
  t.regex(one.text, /Queued: a worker has not stored it yet/);
  t.false(one.text.includes('queued-user'), 'no personal data without a sign-in');
});

test.serial('keyset pages return every event exactly once, ties in time included, with and without filters', async (t) => {
  const collect = async (q: Omit<EventSearch, 'environmentId' | 'limit' | 'before'>, limit: number) => {
    const seen: ListedEvent[] = [];
    let before: EventSearch['before'];
    for (let n = 0; n < 200; n++) {
      const page = await searchEvents(h.db, { environmentId: tenant.environmentId, ...q, limit, before });
      seen.push(...page.events);
      if (!page.next) break;
      before = page.next;
    }
    return seen.map((e) => e.messageId);
  };
  const ids = all.map((e) => e.messageId);
  // Pages of 4 cut through groups of three events of one millisecond.
  t.deepEqual(await collect({}, 4), ids);
  t.deepEqual(await collect({}, 7), ids);
  // A filter read through a walk of 5 rows at a time: the pages go on where each walk stopped.
  t.deepEqual(
    await collect({ event: 'Signed Up', scan: 5 }, 3),
    all.filter((e) => e.event === 'Signed Up').map((e) => e.messageId),
  );
  t.deepEqual(await collect({ status: 'failed', scan: 11 }, 2), ['pg-007']);
  t.deepEqual(await collect({ anonymousId: 'anon-2', scan: 9 }, 2), ['pg-002']);
  t.deepEqual(
    await collect({ userId: 'ann' }, 4),
    all.filter((e) => e.userId === 'ann').map((e) => e.messageId),
  );
  // A time range: the events received in [BASE + 10 s, BASE + 20 s).
  t.deepEqual(
    await collect({ from: BASE + 10_000, to: BASE + 20_000 }, 4),
    ids.filter((id) => {
      const i = Number(id.slice(3));
      return Math.floor(i / 3) >= 10 && Math.floor(i / 3) < 20;
    }),
  );
  // Over HTTP, following the page's own links: 90 events in two pages of 50.
  const pages = await everyPage(`/console/events${q({ env: env() })}`, html);
  t.is(pages.pages, 2);
  t.deepEqual(pages.ids, ids);
  const named = await everyPage(`/console/events${q({ env: env(), event: 'Viewed Page', status: 'processed' })}`, html);
  t.deepEqual(
    named.ids,
    all.filter((e) => e.event === 'Viewed Page' && e.status === 'processed').map((e) => e.messageId),
  );
  // A key in the URL that is not one is ignored (the first page).
  t.deepEqual(listed((await call(dashboard.url, `/console/events${q({ env: env(), before: 'x' })}`, { headers: html })).text), ids.slice(0, 50));
  t.is(formatEventKey({ receivedAt: 5, id: '9' }), '5.9');
});

test.serial('each statement of the pages is planned on an index, never a scan of the events', async (t) => {
  const pool = poolOf(h.db);
  const plan = async (statement: { text: string; values: unknown[] }, also?: string) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // A test table is small enough for a sequential scan to win; what matters is that an index can serve.
      await client.query('SET LOCAL enable_seqscan = off');
      if (also) await client.query(also);
      const { rows } = await client.query<{ 'QUERY PLAN': string }>({ text: `EXPLAIN ${statement.text}`, values: statement.values });
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  };
  const base = { environmentId: tenant.environmentId, limit: 50 };
  const before = { receivedAt: BASE + 20_000, id: '1' };
  for (const q of [
    base,
    { ...base, before },
    { ...base, from: BASE, to: BASE + 60_000 },
    { ...base, event: 'Signed Up', before },
    { ...base, status: 'failed' as const },
  ]) {
    const p = await plan(searchStatement(q));
    t.regex(p, /environment_id_received_at_idx/, p);
    t.notRegex(p, /Seq Scan on events/, p);
  }
  const byUser = await plan(searchStatement({ ...base, userId: 'ann', before }));
  // Either the person's rows by the hash indexes on user_id and user_key (a few among many), or the
  // environment's index walked newest first (a person with many of them): PostgreSQL weighs the two.
  t.regex(byUser, /user_id_idx|user_key_idx|environment_id_received_at_idx/, byUser);
  t.notRegex(byUser, /Seq Scan on events/, byUser);
  // With statistics, a user among many (here: none of the 90 events) is found by the hash indexes.
  await pool.query('ANALYZE events');
  const rare = await plan(searchStatement({ ...base, userId: 'someone-rare', before }));
  t.regex(rare, /Bitmap Index Scan on events_p\d+_user_id_idx/, rare);
  t.regex(rare, /Bitmap Index Scan on events_p\d+_user_key_idx/, rare);
});

test.serial('once an operator exists each page needs a session; an admin sees personal data, a read-only operator does not', async (t) => {
  await addOperator(h.db, 'alice', 'admin', PASSWORD);
  await addOperator(h.db, 'viewer', 'read-only', PASSWORD);
  const paths = [
    `/console/events${q({ env: env() })}`,
    `/console/event${q({ env: env(), id: 'pg-000' })}`,
    `/console/dead-letters${q({ env: env() })}`,
    `/console/person${q({ env: env(), user: 'ann' })}`,
    `/console/keys${q({ org: tenant.slug })}`,
    '/console/keys',
    `/console/refused${q({ env: env() })}`,
    '/console/refused',
  ];
  t.is(CONSOLE_PAGES.length, 6);
  for (const path of paths) {
    const script = await call(dashboard.url, path);
    t.is(script.status, 401, path);
    t.false(script.text.includes('pg-000'), path);
    const browser = await call(dashboard.url, path, { headers: html });
    t.is(browser.status, 303, path);
    t.is(browser.headers.get('location'), `/login?next=${encodeURIComponent(path)}`);
  }
  for (const action of ['/console/person/forget', '/console/keys/revoke', '/console/dead-letters/retry'])
    t.is((await call(dashboard.url, action, { method: 'POST', body: { env: env(), user: 'ann' } })).status, 401, action);

  const admin = await logInAs(dashboard.url, 'alice', PASSWORD);
  const as = (login: Login) => ({ ...html, cookie: login.cookie });
  const events = await call(dashboard.url, paths[0], { headers: as(admin) });
  t.is(events.status, 200);
  t.true(events.text.includes('<a href="/console/person?env='), 'user IDs link to their person');
  const byUser = await call(dashboard.url, `/console/events${q({ env: env(), by: 'userId', who: 'ann' })}`, { headers: as(admin) });
  t.deepEqual(
    listed(byUser.text),
    all.filter((e) => e.userId === 'ann').map((e) => e.messageId),
  );

  const one = await call(dashboard.url, paths[1], { headers: as(admin) });
  t.is(one.status, 200);
  t.true(one.text.includes(SECRET), 'the stored JSON');
  t.regex(one.text, /1 journey run started/);
  t.regex(one.text, /Welcome series/);
  t.regex(one.text, /may drive journeys: not taken by the journey engine/);
  const limited = await call(dashboard.url, `/console/event${q({ env: env(), id: 'pg-010' })}`, { headers: as(admin) });
  t.regex(limited.text, /within journey limits<\/dt><dd><span class="no">no<\/span> <bdi>properties over the journey size limit<\/bdi>/);
  t.regex(limited.text, /drives no journey/);
  const failed = await call(dashboard.url, `/console/event${q({ env: env(), id: 'pg-007' })}`, { headers: as(admin) });
  t.regex(failed.text, /<span class="pill failed">failed<\/span> <bdi>23514: refused by a check<\/bdi>/);
  const missing = await call(dashboard.url, `/console/event${q({ env: env(), id: 'nope' })}`, { headers: as(admin) });
  t.is(missing.status, 404);

  const person = await call(dashboard.url, paths[3], { headers: as(admin) });
  t.is(person.status, 200);
  const text = person.text;
  t.regex(text, /<bdi class="mono">ann<\/bdi>, <bdi class="mono">ann-old<\/bdi>/, 'joined user IDs');
  t.regex(
    text,
    /<td><bdi>plan<\/bdi><\/td><td><span class="mono"><bdi>&quot;pro&quot;<\/bdi><\/span><\/td><td>[0-9-]+ [0-9:.]+<\/td>/,
    'a trait and when it was written',
  );
  t.regex(text, /marketing: <span class="pill granted">granted<\/span> consent, expires /, 'consent: basis and expiry');
  t.true(text.includes('welcome-1'), 'the journey message');
  // The person's events, newest first, all 30 on one page.
  const events30 = [
    ...text
      .split('<h2>Events</h2>')[1]
      .split('<h2>Journey runs</h2>')[0]
      .matchAll(/<bdi class="mono">(pg-\d+)<\/bdi>/g),
  ].map((m) => m[1]);
  t.deepEqual(
    events30,
    all.filter((e) => e.userId === 'ann').map((e) => e.messageId),
  );
  // The actions: forms that post with the session's CSRF token (test/console/person-actions.test.ts submits them).
  for (const action of ['export', 'suppress', 'unsuppress', 'forget']) t.true(text.includes(`<form method="post" action="/console/person/${action}">`), action);
  t.true(text.includes(`name="_csrf" value="${admin.csrfToken}"`));
  const keys = await call(dashboard.url, paths[4], { headers: as(admin) });
  t.true(keys.text.includes('action="/console/keys/create"'));
  t.true(keys.text.includes(`name="_csrf" value="${admin.csrfToken}"`));

  const viewer = await logInAs(dashboard.url, 'viewer', PASSWORD);
  const hidden = await call(dashboard.url, paths[0], { headers: as(viewer) });
  t.is(hidden.status, 200);
  t.true(hidden.text.includes('<span class="hidden">hidden</span>'));
  t.false(hidden.text.includes('<a href="/console/person?env='));
  const hiddenOne = await call(dashboard.url, paths[1], { headers: as(viewer) });
  t.false(hiddenOne.text.includes(SECRET));
  t.regex(hiddenOne.text, /a read-only operator sees no personal data/);
  t.is((await call(dashboard.url, paths[3], { headers: as(viewer) })).status, 403);
  // No form but the bar's Log out.
  t.deepEqual(
    [...(await call(dashboard.url, paths[4], { headers: as(viewer) })).text.matchAll(/<form [^>]*method="post"[^>]*>/g)].map((m) => m[0]),
    ['<form class="logout" method="post" action="/logout">'],
  );
  // A read-only operator's change is refused by the gate (403), before any page.
  const post = await call(dashboard.url, '/console/person/forget', {
    method: 'POST',
    headers: { cookie: viewer.cookie, 'x-csrf-token': viewer.csrfToken },
    body: { env: env(), user: 'ann' },
  });
  t.is(post.status, 403);
});
