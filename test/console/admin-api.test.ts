// The admin API over real HTTP, beside a real gateway and worker on the same PostgreSQL and
// Redis: every route refuses a request without a token or session (401), a read-only operator
// reads but changes nothing (403), a key made through it is accepted by Track (202) until it is
// revoked through it (401, on the gateway's cache too), and a forget request, polled until it
// succeeded, leaves nothing of the person; each change is audited with the operator's name.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { addOperator, createToken } from '../../gateway/console/operators.ts';
import { eventually } from '../helpers/eventually.ts';
import { call as callDashboard, consoleDatabase, consoleInProcess, logInAs } from '../helpers/console.ts';
import { loadApiChecker } from '../helpers/openapi.ts';
import { acceptedTrack, appliedIdentify, request, trackBody } from '../helpers/http.ts';
import { gatewayInProcess, workerInProcess, type InProcessGateway } from '../helpers/processes.ts';
import { newEnvironment, newTenant, openHarness, type Harness, type Tenant, closeEmptied } from '../helpers/services.ts';
import type { Workers } from '../../workers/main.ts';

const PASSWORD = 'correct horse battery staple';

/** docs/admin-openapi.yaml: every reply of a documented operation must match it (status, body, headers). */
const checker = loadApiChecker(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../docs/admin-openapi.yaml'), /^\/admin\/api\//);

/** A request to the dashboard whose reply, when it is one of a documented operation, matches the document. */
async function call(url: string, requestPath: string, options: Parameters<typeof callDashboard>[2] = {}) {
  const res = await callDashboard(url, requestPath, options);
  const verdict = checker.check({
    method: options.method ?? 'GET',
    path: requestPath,
    status: res.status,
    header: (name) => res.headers.get(name) ?? undefined,
    text: res.text,
  });
  if (verdict && verdict.operation !== 'unmatched' && verdict.problems.length)
    throw new Error(`${verdict.operation} ${res.status} does not match docs/admin-openapi.yaml: ${verdict.problems.join('; ')}`);
  return res;
}
const V1 = '/admin/api/v1';
let h: Harness;
let gateway: InProcessGateway;
let worker: Workers;
let dashboard: Awaited<ReturnType<typeof consoleInProcess>>;
let admin: Record<string, string>;
let viewer: Record<string, string>;
let tenant: Tenant;

test.before(async () => {
  h = await openHarness({ DATABASE_URL: await consoleDatabase('admin_api') });
  gateway = await gatewayInProcess(h);
  worker = await workerInProcess(h);
  // The harness's settings: the same queues and the same channels to the gateway's caches.
  dashboard = await consoleInProcess(h.env);
  await addOperator(h.db, 'ada', 'admin', PASSWORD);
  await addOperator(h.db, 'rob', 'read-only', PASSWORD);
  admin = { authorization: `Bearer ${(await createToken(h.db, 'ada')).token}` };
  viewer = { authorization: `Bearer ${(await createToken(h.db, 'rob')).token}` };
  tenant = await newTenant(h);
});
test.after.always(async () => {
  await dashboard?.close();
  await worker?.close();
  await gateway?.close();
  await closeEmptied(h);
});

const keys = () => `${V1}/organizations/${tenant.slug}/environments/${tenant.slug}/keys`;
const requests = () => `${V1}/organizations/${tenant.slug}/environments/${tenant.slug}/privacy-requests`;

/** Every route of the API, with a body where it takes one. */
const ROUTES = (): [string, string, unknown?][] => [
  ['GET', `${V1}/me`],
  ['GET', `${V1}/organizations`],
  ['GET', `${V1}/organizations/${tenant.slug}/environments`],
  ['GET', keys()],
  ['POST', keys()],
  ['POST', `${keys()}/${tenant.suffix}/revoke`],
  ['POST', requests(), { action: 'forget', userId: 'nobody' }],
  ['GET', `${V1}/privacy-requests/00000000-0000-4000-8000-000000000000`],
  ['GET', `${V1}/privacy-requests/00000000-0000-4000-8000-000000000000/export`],
  ['GET', `${V1}/audit`],
  ['GET', `${V1}/nothing-here`],
  ['DELETE', keys()],
];

test.serial('every route answers 401 without a token or a session, or with a wrong one', async (t) => {
  const wrong: Record<string, string>[] = [
    {},
    { authorization: 'Bearer itko_not-a-token-at-all-00000000000000000000' },
    { authorization: `Bearer ${tenant.key}` },
    { authorization: `Basic ${Buffer.from(`ada:${PASSWORD}`).toString('base64')}` },
    { cookie: 'intake_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' },
  ];
  for (const [method, path, body] of ROUTES()) {
    for (const headers of wrong) {
      const res = await call(dashboard.url, path, { method, headers, body });
      t.is(res.status, 401, `${method} ${path} ${JSON.stringify(headers)}`);
      t.deepEqual(res.json, { error: 'Unauthorized' });
      t.is(res.headers.get('www-authenticate'), 'Bearer realm="intake"');
    }
  }
  // Nothing was done.
  t.is(await h.db.apiKey.count({ where: { environmentId: tenant.environmentId } }), 1);
  t.is(await h.db.privacyRequest.count({ where: { environmentId: tenant.environmentId } }), 0);
});

test.serial('a read-only operator reads every list and changes nothing (403)', async (t) => {
  const me = await call(dashboard.url, `${V1}/me`, { headers: viewer });
  t.deepEqual(me.json, { name: 'rob', role: 'read-only' });
  for (const [method, path, body] of ROUTES()) {
    const res = await call(dashboard.url, path, { method, headers: viewer, body });
    if (method === 'POST') {
      t.is(res.status, 403, `${method} ${path}`);
      t.deepEqual(res.json, { error: 'Forbidden: a read-only operator changes nothing' });
    } else if (path.endsWith('/export') || path.includes('/privacy-requests/')) t.not(res.status, 200, path);
    else if (path.endsWith('nothing-here')) t.is(res.status, 404);
    else if (method === 'DELETE') t.is(res.status, 405);
    else t.is(res.status, 200, `${method} ${path}: ${res.text}`);
  }
  t.is(await h.db.apiKey.count({ where: { environmentId: tenant.environmentId, status: 'active' } }), 1);
  t.is(await h.db.privacyRequest.count({ where: { environmentId: tenant.environmentId } }), 0);
  t.is(await h.db.consoleAudit.count(), 0);
});

test.serial('environments: the organization’s, Production first', async (t) => {
  const other = await newEnvironment(h, tenant);
  const res = await call(dashboard.url, `${V1}/organizations/${tenant.slug}/environments`, { headers: admin });
  t.is(res.status, 200);
  t.deepEqual(
    res.json.map((e: { pathValue: string; production: boolean; removed: boolean }) => [e.pathValue, e.production, e.removed]),
    [
      [tenant.slug, true, false],
      [other.pathValue, false, false],
    ],
  );
  t.is((await call(dashboard.url, `${V1}/organizations/no-such-org/environments`, { headers: admin })).status, 404);
});

test.serial('a key made through the API is accepted by Track (202) until it is revoked through the API (401); both are audited', async (t) => {
  const created = await call(dashboard.url, keys(), { method: 'POST', headers: admin });
  t.is(created.status, 201, created.text);
  const { key, suffix } = created.json as { key: string; suffix: string };
  t.like(created.json, { status: 'active', environment: tenant.slug });
  t.regex(key, /^itk_[A-Za-z0-9]{40}$/);
  const withKey = { ...tenant, key };
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': key }, body: trackBody() })).status, 202);

  const listed = await call(dashboard.url, keys(), { headers: admin });
  const entry = listed.json.find((k: { suffix: string }) => k.suffix === suffix);
  t.like(entry, { suffix, status: 'active', environment: tenant.slug });
  t.true(Math.abs(entry.createdAt - Date.now()) < 60_000);
  t.false(listed.text.includes(key), 'the key itself is never listed');

  const revoked = await call(dashboard.url, `${keys()}/${suffix}/revoke`, { method: 'POST', headers: admin });
  t.is(revoked.status, 200, revoked.text);
  t.deepEqual(revoked.json, { suffix, status: 'revoked' });
  // At once: the gateway had the key cached, and the revocation told it to drop it.
  const refused = await request(gateway.url, `/api/track/${withKey.slug}`, { headers: { 'x-api-key': key }, body: trackBody() });
  t.is(refused.status, 401);
  t.deepEqual(refused.json, { error: 'Invalid API key' });
  // The tenant's first key still works.
  t.is((await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() })).status, 202);

  const audit = await call(dashboard.url, `${V1}/audit`, { headers: viewer });
  t.deepEqual(
    audit.json.slice(0, 2).map((a: { operator: string; action: string; target: string; detail: unknown }) => [a.operator, a.action, a.target, a.detail]),
    [
      ['ada', 'key.revoke', `${tenant.slug}/${tenant.slug}`, { suffix }],
      ['ada', 'key.create', `${tenant.slug}/${tenant.slug}`, { suffix }],
    ],
  );
  t.is((await call(dashboard.url, `${keys()}/zzzzz/revoke`, { method: 'POST', headers: admin })).status, 404);
});

test.serial('with a session, a change needs the X-CSRF-Token header', async (t) => {
  const login = await logInAs(dashboard.url, 'ada', PASSWORD);
  const without = await call(dashboard.url, keys(), { method: 'POST', headers: { cookie: login.cookie } });
  t.is(without.status, 403);
  t.deepEqual(without.json, { error: 'Forbidden: missing or wrong CSRF token' });
  const withToken = await call(dashboard.url, keys(), { method: 'POST', headers: { cookie: login.cookie, 'x-csrf-token': login.csrfToken } });
  t.is(withToken.status, 201);
  t.is((await call(dashboard.url, keys(), { headers: { cookie: login.cookie } })).status, 200, 'a read needs no token');
});

/** Polls a privacy request until it is done; returns it. */
async function settled(id: string) {
  return eventually(
    async () => {
      const res = await call(dashboard.url, `${V1}/privacy-requests/${id}`, { headers: viewer });
      return ['succeeded', 'failed'].includes(res.json.status) ? res.json : null;
    },
    { timeoutMs: 30_000 },
  );
}

test.serial('forget: a request with an id, polled until it succeeded; the person is gone and the audits name the operator', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'ada-lovelace', traits: { email: 'ada@example.com', name: 'Ada' } });
  for (let i = 0; i < 3; i++) await acceptedTrack(gateway.url, tenant, { userId: 'ada-lovelace', event: 'Viewed' });
  t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'ada-lovelace' } })) === 3));

  const submitted = await call(dashboard.url, requests(), { method: 'POST', headers: admin, body: { action: 'forget', userId: 'ada-lovelace' } });
  t.is(submitted.status, 202, submitted.text);
  t.like(submitted.json, { action: 'forget', status: 'pending', environment: tenant.slug, operator: 'ada' });
  t.regex(submitted.json.userHash, /^[0-9a-f]{64}$/);
  t.is(submitted.headers.get('location'), `${V1}/privacy-requests/${submitted.json.id}`);
  t.false(submitted.text.includes('ada-lovelace'), 'no raw user ID in the answer');

  const done = await settled(submitted.json.id);
  t.is(done.status, 'succeeded', String(done.error));
  t.like(done.result, { removed: { profiles: 1, events: 3 }, joinedUserIds: 0 });
  t.true(done.finishedAt >= done.startedAt && done.startedAt >= done.createdAt);
  t.false(JSON.stringify(done).includes('ada-lovelace'));

  const profile = await request(gateway.url, `/api/profiles/${tenant.slug}/ada-lovelace`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  t.is(profile.status, 404);
  t.is(await h.db.event.count({ where: { environmentId: tenant.environmentId, userId: 'ada-lovelace' } }), 0);
  const privacyAudit = await h.db.privacyAudit.findMany({ where: { environmentId: tenant.environmentId } });
  t.deepEqual(
    privacyAudit.map((a) => [a.action, a.operator]),
    [['forget', 'ada']],
  );
  const consoleAudit = await h.db.consoleAudit.findFirstOrThrow({ where: { action: 'privacy.forget' } });
  t.is(consoleAudit.operator, 'ada');
  t.false(consoleAudit.detail.includes('ada-lovelace'));
  t.is(JSON.parse(consoleAudit.detail).request, submitted.json.id);
});

test.serial('suppress, unsuppress and export requests; the export is downloaded by admins only', async (t) => {
  await appliedIdentify(gateway.url, tenant, { userId: 'grace', traits: { name: 'Grace' } });
  const submit = async (action: string) => {
    const res = await call(dashboard.url, requests(), { method: 'POST', headers: admin, body: { action, userId: 'grace' } });
    t.is(res.status, 202, res.text);
    return settled(res.json.id);
  };
  const suppressed = await submit('suppress');
  t.is(suppressed.status, 'succeeded', String(suppressed.error));
  t.like(suppressed.result, { changed: true });
  t.is(await h.db.privacyUser.count({ where: { environmentId: tenant.environmentId, suppressedAt: { not: null } } }), 1);
  const unsuppressed = await submit('unsuppress');
  t.like(unsuppressed.result, { changed: true });
  t.is(await h.db.privacyUser.count({ where: { environmentId: tenant.environmentId, suppressedAt: { not: null } } }), 0);

  const exported = await submit('export');
  t.is(exported.status, 'succeeded', String(exported.error));
  t.true(exported.result.bytes > 0);
  const download = `${V1}/privacy-requests/${exported.id}/export`;
  t.is((await call(dashboard.url, download, { headers: viewer })).status, 403);
  const document = await call(dashboard.url, download, { headers: admin });
  t.is(document.status, 200);
  t.is(document.json.userId, 'grace');
  t.is(document.json.profile.traits?.name ?? document.json.profile.fields?.name ?? 'Grace', 'Grace');
  t.is((await call(dashboard.url, `${V1}/privacy-requests/${suppressed.id}/export`, { headers: admin })).status, 404);

  const audit = await h.db.privacyAudit.findMany({ where: { environmentId: tenant.environmentId, action: { in: ['suppress', 'unsuppress'] } } });
  t.deepEqual(
    audit.map((a) => a.operator),
    ['ada', 'ada'],
  );
});

test('mistakes: 400 for a bad body, 404 for what does not exist, 409 for a removed environment', async (t) => {
  const post = (body: unknown, path = requests()) => call(dashboard.url, path, { method: 'POST', headers: admin, body });
  t.is((await post({ action: 'delete', userId: 'x' })).status, 400);
  t.is((await post({ action: 'forget' })).status, 400);
  t.is((await post({ action: 'forget', userId: '   ' })).status, 400);
  t.is((await post({ action: 'suppress', userId: 'x', suppress: true })).status, 400);
  t.is((await post('not json')).status, 400);
  t.is((await post([1])).status, 400);
  t.is((await post({ action: 'forget', userId: 'x' }, `${V1}/organizations/nope/environments/nope/privacy-requests`)).status, 404);
  t.is((await call(dashboard.url, `${V1}/privacy-requests/not-a-uuid`, { headers: admin })).status, 404);
  t.is((await call(dashboard.url, `${V1}/audit?limit=0`, { headers: admin })).status, 400);
  const gone = await newEnvironment(h, tenant);
  await h.db.environment.update({ where: { id: gone.environmentId }, data: { removedAt: new Date() } });
  const created = await call(dashboard.url, `${V1}/organizations/${tenant.slug}/environments/${gone.pathValue}/keys`, { method: 'POST', headers: admin });
  t.is(created.status, 409);
  t.deepEqual(created.json, { error: `environment ${gone.pathValue} is removed` });
});
