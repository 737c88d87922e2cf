// The person page's actions over real HTTP, beside a real gateway and worker on the same
// PostgreSQL and Redis: an admin's forms (with the session's CSRF token) submit the admin API's
// privacy requests and land on the request's page, which shows its id and status and is reloaded
// until it is done. Suppress: the user's Track is answered 202 and stored nowhere. Forget: a wrong
// typed confirmation changes nothing, the right one leaves no profile (404). Export: the request's
// page offers the download, whose JSON holds the profile. A read-only operator, a post without
// the CSRF token, or a dashboard without operators acts on nobody (403). Every page's bar has a
// Log out button for a signed-in operator.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { call, consoleDatabase, consoleInProcess, logInAs, type Login } from '../helpers/console.ts';
import { eventually } from '../helpers/eventually.ts';
import { acceptedTrack, appliedIdentify, request } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, openHarness, type Harness, type Tenant, closeEmptied } from '../helpers/services.ts';
import type { Workers } from '../../workers/main.ts';

const PASSWORD = 'correct horse battery staple';
let h: Harness;
let gateway: InProcessGateway;
let worker: Workers;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
let tenant: Tenant;

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await consoleDatabase('person_actions'), WORKER_BATCH_WAIT_MS: '2' });
  gateway = await gatewayInProcess(h);
  worker = await workerInProcess(h);
  dashboard = await consoleInProcess(h.env);
  tenant = await newTenant(h);
});
test.after.always(async () => {
  await dashboard?.close();
  await worker?.close();
  await gateway?.close();
  await closeEmptied(h);
});

const html = (login?: Login) => ({ accept: 'text/html', ...(login ? { cookie: login.cookie } : {}) });
/** The person page's form of `action`, as a browser posts it. */
const post = (action: string, fields: Record<string, string>, login?: Login) =>
  call(dashboard.url, `/console/person/${action}`, {
    method: 'POST',
    headers: { ...html(login), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ env: tenant.slug, ...fields }).toString(),
  });
const personPath = (user: string) => `/console/person?${new URLSearchParams({ env: tenant.slug, user })}`;
const eventsOf = (userId: string) => h.db.event.count({ where: { environmentId: tenant.environmentId, userId } });
const profile = (userId: string) => request(gateway.url, `/api/profiles/${tenant.slug}/${userId}`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
const queueEmpty = async () => {
  const c = await h.operator.eventsQueue().getJobCounts('wait', 'active', 'delayed', 'prioritized');
  return Object.values(c).every((n) => n === 0);
};

/** The request page an action was sent to: its id, and the page reloaded until the request is done. */
async function settled(location: string, login: Login) {
  const id = /^\/console\/privacy-requests\/([0-9a-f-]{36})\?/.exec(location)?.[1];
  if (!id) throw new Error(`not a request's page: ${location}`);
  const page = await eventually(
    async () => {
      const res = await call(dashboard.url, location, { headers: html(login) });
      return /<span class="pill (succeeded|failed)">/.test(res.text) ? res : null;
    },
    { timeoutMs: 30_000 },
  );
  if (!page) throw new Error(`request ${id} did not finish`);
  return { id, page };
}

let ada: Login;
let rob: Login;

test.serial('without operators: a person action answers 403 and submits nothing; no Log out button', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'nobody-acts', traits: { plan: 'free' } });
  for (const action of ['suppress', 'forget', 'export', 'unsuppress']) {
    const res = await post(action, { user: 'nobody-acts', confirm: 'nobody-acts' });
    t.is(res.status, 403, action);
  }
  t.is(await h.db.privacyRequest.count(), 0);
  const page = await call(dashboard.url, personPath('nobody-acts'), { headers: html() });
  t.false(page.text.includes('action="/console/person/'), 'no action form');
  t.false(page.text.includes('Log out'));
});

test.serial('a signed-in operator has a Log out button on every page; it ends the session', async (t) => {
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  await addOperator(h.db, 'rob', 'read-only', PASSWORD);
  const leaving = await logInAs(dashboard.url, 'ada', PASSWORD);
  const button = `<form class="logout" method="post" action="/logout"><span>ada (admin)</span><input type="hidden" name="_csrf" value="${leaving.csrfToken}"><button type="submit">Log out</button></form>`;
  for (const path of ['/console/events', personPath('nobody-acts'), '/console/keys', '/live/events', '/']) {
    const page = await call(dashboard.url, path, { headers: html(leaving) });
    t.is(page.status, 200, path);
    t.true(page.text.includes(button), path);
  }
  const out = await call(dashboard.url, '/logout', {
    method: 'POST',
    headers: { ...html(leaving), 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: leaving.csrfToken }).toString(),
  });
  t.is(out.status, 303);
  t.is(out.headers.get('location'), '/login');
  t.is((await call(dashboard.url, '/console/events', { headers: html(leaving) })).status, 303, 'the session is gone');
  ada = await logInAs(dashboard.url, 'ada', PASSWORD);
  rob = await logInAs(dashboard.url, 'rob', PASSWORD);
});

test.serial('a read-only operator, or a post without the CSRF token, acts on nobody (403)', async (t) => {
  const page = await call(dashboard.url, personPath('nobody-acts'), { headers: html(rob) });
  t.false(page.text.includes('action="/console/person/'));
  for (const action of ['suppress', 'unsuppress', 'forget', 'export']) {
    t.is((await post(action, { user: 'nobody-acts', confirm: 'nobody-acts', _csrf: rob.csrfToken }, rob)).status, 403, `read-only ${action}`);
    t.is((await post(action, { user: 'nobody-acts', confirm: 'nobody-acts' }, ada)).status, 403, `no token ${action}`);
    t.is((await post(action, { user: 'nobody-acts', confirm: 'nobody-acts', _csrf: rob.csrfToken }, ada)).status, 403, `another's token ${action}`);
  }
  t.is(await h.db.privacyRequest.count(), 0);
  t.is(await h.db.consoleAudit.count(), 0);
  t.is((await profile('nobody-acts')).status, 200);
});

test.serial('suppress: the request page shows its id and status; then the user’s Track is answered 202 and stored nowhere', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'sam', traits: { plan: 'free' } });
  const page = await call(dashboard.url, personPath('sam'), { headers: html(ada) });
  t.true(page.text.includes('<form method="post" action="/console/person/suppress">'));
  const sent = await post('suppress', { user: 'sam', _csrf: ada.csrfToken }, ada);
  t.is(sent.status, 303, sent.text);
  const { id, page: done } = await settled(sent.headers.get('location')!, ada);
  t.true(done.text.includes(`<bdi class="mono">${id}</bdi>`), 'the request id');
  t.regex(done.text, /<dt>action<\/dt><dd>suppress<\/dd><dt>status<\/dt><dd><span class="pill succeeded">succeeded<\/span>/);
  t.regex(done.text, /<dt>operator<\/dt><dd><bdi>ada<\/bdi>/);
  t.true(done.text.includes(`<a href="${personPath('sam').replace('&', '&amp;')}">Back to the person</a>`));
  t.false(done.text.includes('data-ms='), 'a finished request no longer reloads');

  t.deepEqual((await acceptedTrack(gateway.url, tenant, { userId: 'sam', messageId: 'sam-after' })).json, { message_id: 'sam-after', status: 'accepted' });
  await acceptedTrack(gateway.url, tenant, { userId: 'other', messageId: 'other-after' });
  t.true(await eventually(async () => (await eventsOf('other')) === 1));
  t.true(await eventually(queueEmpty));
  t.is(await eventsOf('sam'), 0);
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, messageId: 'sam-after' } }), 0);

  // Unsuppress the same way: the next Track is stored.
  const back = await post('unsuppress', { user: 'sam', _csrf: ada.csrfToken }, ada);
  t.regex((await settled(back.headers.get('location')!, ada)).page.text, /<span class="pill succeeded">succeeded<\/span>/);
  await acceptedTrack(gateway.url, tenant, { userId: 'sam', messageId: 'sam-back' });
  t.true(await eventually(async () => (await eventsOf('sam')) === 1));

  const audit = await h.db.consoleAudit.findMany({ orderBy: { id: 'asc' } });
  t.deepEqual(
    audit.map((a) => [a.operator, a.action, a.target]),
    [
      ['ada', 'privacy.suppress', tenant.slug],
      ['ada', 'privacy.unsuppress', tenant.slug],
    ],
  );
  t.is(JSON.parse(audit[0].detail).request, id);
  t.false(
    audit.some((a) => a.detail.includes('sam')),
    'no raw user ID in the audit',
  );
});

test.serial('forget: a wrong confirmation changes nothing and says so; the right one, polled to succeeded, leaves no profile', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'fay', traits: { email: 'fay@example.com' } });
  await acceptedTrack(gateway.url, tenant, { userId: 'fay', event: 'Viewed' });
  t.true(await eventually(async () => (await eventsOf('fay')) === 1));
  const requestsBefore = await h.db.privacyRequest.count();

  for (const confirm of ['', 'fa', 'Fay', ' fay']) {
    const wrong = await post('forget', { user: 'fay', confirm, _csrf: ada.csrfToken }, ada);
    t.is(wrong.status, 422, JSON.stringify(confirm));
    t.regex(wrong.text, /The confirmation does not match the userId <bdi class="mono">fay<\/bdi>: nothing was forgotten/);
  }
  t.is(await h.db.privacyRequest.count(), requestsBefore);
  t.is((await profile('fay')).status, 200);
  t.is(await eventsOf('fay'), 1);

  const sent = await post('forget', { user: 'fay', confirm: 'fay', _csrf: ada.csrfToken }, ada);
  t.is(sent.status, 303, sent.text);
  const { page } = await settled(sent.headers.get('location')!, ada);
  t.regex(page.text, /<dt>action<\/dt><dd>forget<\/dd><dt>status<\/dt><dd><span class="pill succeeded">succeeded<\/span>/);
  t.is((await profile('fay')).status, 404);
  t.is(await eventsOf('fay'), 0);
  const person = await call(dashboard.url, personPath('fay'), { headers: html(ada) });
  t.is(person.status, 404);
  t.regex(person.text, /Nothing is stored of/);
  const audit = await h.db.consoleAudit.findFirstOrThrow({ where: { action: 'privacy.forget' } });
  t.is(audit.operator, 'ada');
  t.like(JSON.parse(audit.detail), { suppress: false });
});

test.serial('export: once succeeded the request page offers the download (admins only), whose JSON holds the profile', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'grace', traits: { name: 'Grace', plan: 'pro' } });
  const sent = await post('export', { user: 'grace', _csrf: ada.csrfToken }, ada);
  t.is(sent.status, 303, sent.text);
  const { id, page } = await settled(sent.headers.get('location')!, ada);
  t.regex(page.text, /<span class="pill succeeded">succeeded<\/span>/);
  const link = `/console/privacy-requests/${id}/export`;
  t.true(page.text.includes(`<a href="${link}" download>Download the export (JSON)</a>`));

  const viewerPage = await call(dashboard.url, sent.headers.get('location')!, { headers: html(rob) });
  t.is(viewerPage.status, 200);
  t.false(viewerPage.text.includes(link), 'no download for a read-only operator');
  t.is((await call(dashboard.url, link, { headers: html(rob) })).status, 403);
  t.is((await call(dashboard.url, link, { headers: html() })).status, 303, 'no session: to the login');

  const download = await call(dashboard.url, link, { headers: html(ada) });
  t.is(download.status, 200);
  t.is(download.headers.get('content-disposition'), `attachment; filename="export-${id}.json"`);
  t.is(download.json.userId, 'grace');
  t.like(download.json.profile.traits ?? download.json.profile.fields, { name: 'Grace', plan: 'pro' });
  const audit = await h.db.consoleAudit.findFirstOrThrow({ where: { action: 'privacy.export' } });
  t.is(audit.operator, 'ada');
  t.is(JSON.parse(audit.detail).request, id);

  t.is((await call(dashboard.url, '/console/privacy-requests/00000000-0000-4000-8000-000000000000', { headers: html(ada) })).status, 404);
  t.is((await post('erase', { user: 'grace', _csrf: ada.csrfToken }, ada)).status, 404);
  t.is((await call(dashboard.url, '/console/person/export', { headers: html(ada) })).status, 405);
});
