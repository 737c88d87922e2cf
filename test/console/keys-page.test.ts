// The console's keys page over real HTTP, beside a real gateway: an organization's environments
// and keys by suffix with status and creation time; an admin creates a key (shown once, with a
// copy button) that Track accepts (202), and revokes it after a confirmation page (401 at once);
// a read-only operator, or a dashboard without operators, sees the keys and changes nothing.
import test from 'ava';
import { addOperator } from '../../gateway/console/operators.ts';
import { call, consoleDatabase, consoleInProcess, logInAs, type Login } from '../helpers/console.ts';
import { request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newEnvironment, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const PASSWORD = 'correct horse battery staple';
let h: Harness;
let gateway: InProcessGateway;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
let tenant: Tenant;
let staging: Awaited<ReturnType<typeof newEnvironment>>;

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await consoleDatabase('keys_page') });
  gateway = await gatewayInProcess(h);
  dashboard = await consoleInProcess(h.env);
  tenant = await newTenant(h);
  staging = await newEnvironment(h, tenant);
});
test.after.always(async () => {
  await dashboard?.close();
  await gateway?.close();
  await h?.close();
});

const html = (login?: Login) => ({ accept: 'text/html', ...(login ? { cookie: login.cookie } : {}) });
const form = (login: Login, fields: Record<string, string>) => ({
  method: 'POST',
  headers: { ...html(login), 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams(fields).toString(),
});
const track = (key: string) => request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': key }, body: trackBody() });

test.serial('without operators: the keys of each environment by suffix, and no way to change them', async (t) => {
  const page = await call(dashboard.url, `/console/keys?org=${tenant.slug}`, { headers: html() });
  t.is(page.status, 200);
  t.regex(page.text, new RegExp(`<h2>${tenant.slug} \\(Production\\)</h2>`));
  t.regex(page.text, new RegExp(`<h2>${staging.pathValue} \\(X-Service-Environment: ${staging.envKey}\\)</h2>`));
  t.true(page.text.includes(tenant.suffix) && page.text.includes(staging.suffix));
  t.false(page.text.includes(tenant.key), 'never the key itself');
  t.regex(page.text, /<span class="pill active">active<\/span>/);
  t.notRegex(page.text, /Create a key|Revoke…/);
  t.regex(page.text, /<a href="\/console\/keys" class="on" aria-current="page">Keys<\/a>/);
  const refused = await call(dashboard.url, '/console/keys/create', {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `org=${tenant.slug}&env=${tenant.slug}`,
  });
  t.is(refused.status, 403);
  t.is(await h.db.apiKey.count({ where: { environmentId: tenant.environmentId } }), 1);
});

test.serial('an admin creates a key (shown once), Track takes it, and revokes it after confirming: 401 at once; both audited', async (t) => {
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  t.is((await call(dashboard.url, '/console/keys', { headers: html() })).status, 303, 'a login first');
  const ada = await logInAs(dashboard.url, 'ada', PASSWORD);
  const page = await call(dashboard.url, `/console/keys?org=${tenant.slug}`, { headers: html(ada) });
  t.regex(page.text, /<button type="submit">Create a key<\/button>/);
  t.true(page.text.includes(`name="_csrf" value="${ada.csrfToken}"`));

  t.is((await call(dashboard.url, '/console/keys/create', form(ada, { org: tenant.slug, env: tenant.slug }))).status, 403, 'no CSRF token');
  const created = await call(dashboard.url, '/console/keys/create', form(ada, { org: tenant.slug, env: tenant.slug, _csrf: ada.csrfToken }));
  t.is(created.status, 201);
  t.is(created.headers.get('cache-control'), 'no-store');
  const key = /<input id="new-key" class="mono" size="50" readonly value="(itk_[A-Za-z0-9]{40})">/.exec(created.text)?.[1];
  t.truthy(key, created.text);
  t.regex(created.text, /<button type="button" data-copy="new-key">Copy<\/button>/);
  t.regex(created.text, /<script src="\/console\/copy.js"><\/script>/);
  t.is((await call(dashboard.url, '/console/copy.js')).status, 200);
  t.is((await track(key!)).status, 202);

  const suffix = key!.slice(-5);
  const listed = await call(dashboard.url, `/console/keys?org=${tenant.slug}`, { headers: html(ada) });
  t.true(listed.text.includes(suffix));
  t.false(listed.text.includes(key!), 'shown once only');
  const confirmPath = `/console/keys/revoke?${new URLSearchParams({ org: tenant.slug, env: tenant.slug, suffix })}`;
  t.true(listed.text.includes(confirmPath.replaceAll('&', '&amp;')));
  const confirm = await call(dashboard.url, confirmPath, { headers: html(ada) });
  t.is(confirm.status, 200);
  t.regex(confirm.text, new RegExp(`<button type="submit">Revoke key ${suffix}</button>`));
  t.is((await track(key!)).status, 202, 'the confirmation page changes nothing');

  const revoked = await call(dashboard.url, '/console/keys/revoke', form(ada, { org: tenant.slug, env: tenant.slug, suffix, _csrf: ada.csrfToken }));
  t.is(revoked.status, 303);
  t.is(revoked.headers.get('location'), `/console/keys?org=${tenant.slug}&revoked=${suffix}`);
  const refused = await track(key!);
  t.is(refused.status, 401);
  t.deepEqual(refused.json, { error: 'Invalid API key' });
  t.is((await track(tenant.key)).status, 202, 'the other key still works');
  const after = await call(dashboard.url, `/console/keys?org=${tenant.slug}&revoked=${suffix}`, { headers: html(ada) });
  t.regex(after.text, /is revoked: every gateway answers 401 to it/);
  t.regex(after.text, /<span class="pill revoked">revoked<\/span>/);

  const audit = await h.db.consoleAudit.findMany({ orderBy: { id: 'asc' } });
  t.deepEqual(
    audit.map((a) => [a.operator, a.action, a.target, JSON.parse(a.detail).suffix]),
    [
      ['ada', 'key.create', `${tenant.slug}/${tenant.slug}`, suffix],
      ['ada', 'key.revoke', `${tenant.slug}/${tenant.slug}`, suffix],
    ],
  );
});

test.serial('a read-only operator sees the keys and changes nothing', async (t) => {
  await addOperator(h.db, 'rob', 'read-only', PASSWORD);
  const rob = await logInAs(dashboard.url, 'rob', PASSWORD);
  const page = await call(dashboard.url, `/console/keys?org=${tenant.slug}`, { headers: html(rob) });
  t.is(page.status, 200);
  t.true(page.text.includes(tenant.suffix));
  t.notRegex(page.text, /Create a key|Revoke…/);
  const refused = await call(dashboard.url, '/console/keys/create', form(rob, { org: tenant.slug, env: tenant.slug, _csrf: rob.csrfToken }));
  t.is(refused.status, 403);
  const revoke = await call(
    dashboard.url,
    '/console/keys/revoke',
    form(rob, { org: tenant.slug, env: tenant.slug, suffix: tenant.suffix, _csrf: rob.csrfToken }),
  );
  t.is(revoke.status, 403);
  t.is((await track(tenant.key)).status, 202);
});

test.serial('a removed environment takes no new key; an unknown organization is a page saying so', async (t) => {
  const ada = await logInAs(dashboard.url, 'ada', PASSWORD);
  await h.db.environment.update({ where: { id: staging.environmentId }, data: { removedAt: new Date() } });
  const page = await call(dashboard.url, `/console/keys?org=${tenant.slug}`, { headers: html(ada) });
  t.regex(page.text, new RegExp(`<h2>${staging.pathValue} \\(X-Service-Environment: ${staging.envKey}\\) \\(removed\\)</h2>`));
  t.is((page.text.match(/Create a key/g) ?? []).length, 1, 'Production only');
  const refused = await call(dashboard.url, '/console/keys/create', form(ada, { org: tenant.slug, env: staging.pathValue, _csrf: ada.csrfToken }));
  t.is(refused.status, 409);
  t.regex(refused.text, /is removed/);
  t.is((await call(dashboard.url, '/console/keys?org=no-such-org', { headers: html(ada) })).status, 404);
});
