// A key never reaches a gateway's logs: a gateway process (logging as deployed, level info)
// handles valid keys in all three header forms, wrong, revoked and malformed keys, keys in odd
// places (query string, body, unknown paths, the environment header), and a request that fails
// inside (PostgreSQL cut, so the error is logged); its whole output holds none of them.
import test from 'ava';
import { keyRevoke } from '../../cli/commands/key.ts';
import { request, trackBody } from '../helpers/http.ts';
import { spawnIntake } from '../helpers/processes.ts';
import { startProxy } from '../helpers/proxy.ts';
import { newTenant, openHarness, TEST_DATABASE_URL } from '../helpers/services.ts';

test('no key, valid or not, appears in the gateway output', async (t) => {
  const proxy = await startProxy(TEST_DATABASE_URL);
  t.teardown(() => proxy.close());
  const h = await openHarness();
  t.teardown(() => h.close());
  const tenant = await newTenant(h);
  const revoked = await newTenant(h);
  await keyRevoke(h.operator, [revoked.slug, revoked.suffix]);

  const gateway = await spawnIntake('gateway', { ...h.env, DATABASE_URL: proxy.url(TEST_DATABASE_URL) });
  t.teardown(() => gateway.kill('SIGKILL'));

  const wrong = tenant.key.slice(0, -1) + (tenant.key.endsWith('a') ? 'b' : 'a');
  const secrets = [tenant.key, revoked.key, wrong, 'itk_' + 'Z'.repeat(40)];
  const basic = (key: string) => 'Basic ' + Buffer.from(`${key}:`).toString('base64');
  const track = `/api/track/${tenant.slug}`;
  const sends: [string, Parameters<typeof request>[2]][] = [
    [track, { headers: { 'x-api-key': tenant.key }, body: trackBody() }],
    [track, { headers: { authorization: `Bearer ${tenant.key}` }, body: trackBody() }],
    [track, { headers: { authorization: basic(tenant.key) }, body: trackBody() }],
    [`/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: { userId: 'log-user', traits: { apiKey: tenant.key } } }],
    [`/api/profiles/${tenant.slug}/log-user`, { method: 'GET', headers: { 'x-api-key': tenant.key } }],
    [track, { headers: { 'x-api-key': wrong }, body: trackBody() }],
    [track, { headers: { authorization: `Bearer ${secrets[3]}` }, body: trackBody() }],
    [`/api/track/${revoked.slug}`, { headers: { 'x-api-key': revoked.key }, body: trackBody() }],
    [track, { headers: { 'x-api-key': tenant.key }, body: '{"not json' + tenant.key }],
    [`${track}?api_key=${tenant.key}`, { headers: { 'x-api-key': tenant.key }, body: trackBody({ messageId: tenant.key }) }],
    [`/api/nope/${tenant.key}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() }],
    [track, { headers: { 'x-api-key': tenant.key, 'x-service-environment': tenant.key.toLowerCase() }, body: trackBody() }],
    [`/api/track/${tenant.key.toLowerCase()}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() }],
  ];
  const statuses: number[] = [];
  for (const [path, options] of sends) statuses.push((await request(gateway.url, path, options)).status);
  t.deepEqual(statuses, [202, 202, 202, 200, 200, 401, 401, 401, 400, 202, 404, 400, 403]);

  // A failure inside a request is logged with its error: make one (PostgreSQL cut, a key not cached).
  proxy.cut();
  const other = await newTenant(h);
  secrets.push(other.key);
  const failed = await request(gateway.url, `/api/identify/${other.slug}`, {
    headers: { 'x-api-key': other.key },
    body: { userId: 'u', traits: { a: 1 } },
    timeoutMs: 20_000,
  });
  t.is(failed.status, 500);

  await gateway.kill('SIGTERM');
  const output = gateway.output();
  t.regex(output, /"route":"track"/, 'the requests were logged');
  t.regex(output, /unexpected error/, 'the failure was logged');
  for (const key of secrets) {
    const body = key.slice(4);
    for (const form of [body, body.toLowerCase(), Buffer.from(`${key}:`).toString('base64').slice(0, 40)]) {
      t.false(output.includes(form), `the output holds a key (${form.slice(0, 8)}…)`);
    }
  }
});
