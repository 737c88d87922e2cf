// GET /api/profiles/{org_slug}/{user_id} over HTTP: the profile object, URL-encoded and
// trimmed user IDs, the JSON 404, the plain-text 404, read-after-write and environments.
import test from 'ava';
import { limitConcurrency } from '../helpers/throttle.ts';
import type { ExecutionContext } from 'ava';
import { request, type Reply } from '../helpers/http.ts';
import { harnessWithGateway, type InProcessGateway } from '../helpers/processes.ts';
import { newEnvironment, newTenant, type Harness, type Tenant } from '../helpers/services.ts';

// The spec's plain-text body for an unmatched path or method.
const NOT_FOUND_TEXT = '404 Not Found';

let h: Harness;
let gateway: InProcessGateway;

limitConcurrency(test, 12);

harnessWithGateway(test, (...opened) => ([h, gateway] = opened));

/** Where a call goes: a path value and the headers that select its environment. */
interface Target {
  pathValue: string;
  headers: Record<string, string>;
}

const production = (tenant: Tenant): Target => ({ pathValue: tenant.slug, headers: { 'x-api-key': tenant.key } });

async function nonProduction(tenant: Tenant): Promise<Target> {
  const env = await newEnvironment(h, tenant);
  return { pathValue: env.pathValue, headers: { 'x-api-key': env.key, 'x-service-environment': env.envKey } };
}

const targetOf = (to: Tenant | Target): Target => ('key' in to ? production(to) : to);

/** Identify must answer 200 (the profile is saved before the answer). */
async function identify(t: ExecutionContext, to: Tenant | Target, body: Record<string, unknown>): Promise<void> {
  const target = targetOf(to);
  const reply = await request(gateway.url, `/api/identify/${target.pathValue}`, { headers: target.headers, body });
  t.is(reply.status, 200, reply.text);
}

/** GET with the user ID as it goes into the path (already encoded). */
function getRaw(to: Tenant | Target, encodedUserId: string): Promise<Reply> {
  const target = targetOf(to);
  return request(gateway.url, `/api/profiles/${target.pathValue}/${encodedUserId}`, { method: 'GET', headers: target.headers });
}

function assertJson(t: ExecutionContext, reply: Reply): void {
  t.regex(reply.headers.get('content-type') ?? '', /^application\/json\b/);
}

function assertNotFound(t: ExecutionContext, reply: Reply): void {
  t.is(reply.status, 404, reply.text);
  t.deepEqual(reply.json, { error: 'Profile not found' });
  assertJson(t, reply);
}

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// --- The profile object ---

test('the profile object: org_slug, user_id, profile_id, updated_at (epoch ms) and fields with JSON types kept', async (t) => {
  const tenant = await newTenant(h);
  const traits = {
    name: 'Ann',
    age: 41,
    score: 12.5,
    negative: -3,
    big: 1e21,
    active: true,
    deleted: false,
    nickname: null,
    tags: ['a', 1, null, true, { x: [] }],
    address: { city: 'Oslo', geo: { lat: 59.91, lng: 10.75 }, lines: [] },
    empty: {},
    emptyString: '',
    unicode: 'Zoë ✓ 👋',
    nul: 'a\u0000b',
  };
  await identify(t, tenant, { userId: 'u1', timestamp: '2024-05-01T10:00:00.123Z', traits });
  const reply = await getRaw(tenant, 'u1');
  t.is(reply.status, 200, reply.text);
  assertJson(t, reply);
  const profile = reply.json;
  t.deepEqual(Object.keys(profile).sort(), ['fields', 'org_slug', 'profile_id', 'updated_at', 'user_id']);
  t.is(profile.org_slug, tenant.slug);
  t.is(profile.user_id, 'u1');
  t.is(typeof profile.profile_id, 'string');
  t.true(profile.profile_id.length > 0);
  t.is(profile.updated_at, Date.UTC(2024, 4, 1, 10, 0, 0, 123));
  t.deepEqual(profile.fields, traits);
});

test('a trait named __proto__ is kept as an ordinary field', async (t) => {
  const tenant = await newTenant(h);
  const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, {
    headers: { 'x-api-key': tenant.key },
    body: '{"userId":"u1","traits":{"__proto__":{"polluted":true},"plan":"pro"}}',
  });
  t.is(reply.status, 200, reply.text);
  const fields = (await getRaw(tenant, 'u1')).json.fields;
  t.deepEqual(Object.keys(fields).sort(), ['__proto__', 'plan']);
  t.deepEqual(JSON.parse(JSON.stringify(fields.__proto__)), { polluted: true });
  t.is(({} as Record<string, unknown>).polluted, undefined);
});

test('a trait nested deeper than JSON.stringify recurses reads back whole, as JSON', async (t) => {
  const tenant = await newTenant(h);
  const deep = '['.repeat(10_000) + '"core"' + ']'.repeat(10_000);
  const reply = await request(gateway.url, `/api/identify/${tenant.slug}`, {
    headers: { 'x-api-key': tenant.key },
    body: `{"userId":"deep","traits":{"plan":"pro","nested":${deep}}}`,
  });
  t.is(reply.status, 200, reply.text);
  for (let read = 0; read < 2; read++) {
    const profile = await getRaw(tenant, 'deep');
    t.is(profile.status, 200, profile.text.slice(0, 200));
    assertJson(t, profile);
    t.true(profile.text.endsWith(`"fields":{"plan":"pro","nested":${deep}}}`));
  }
});

test('profile_id is stable across updates; updated_at follows the latest update', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', timestamp: '2024-05-01T10:00:00Z', traits: { a: 1 } });
  const first = (await getRaw(tenant, 'u1')).json;
  await identify(t, tenant, { userId: 'u1', timestamp: '2024-05-02T10:00:00Z', traits: { a: 2 } });
  const second = (await getRaw(tenant, 'u1')).json;
  t.is(second.profile_id, first.profile_id);
  t.is(second.updated_at, Date.UTC(2024, 4, 2, 10));
  t.deepEqual(second.fields, { a: 2 });
});

test('different user IDs have different profile_ids', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { a: 1 } });
  await identify(t, tenant, { userId: 'u2', traits: { a: 1 } });
  const [one, two] = [(await getRaw(tenant, 'u1')).json, (await getRaw(tenant, 'u2')).json];
  t.regex(one.profile_id, UUID_RE);
  t.not(one.profile_id, two.profile_id);
});

// --- User IDs in the path ---

const encodedLookup = test.macro({
  async exec(t, userId: string, encoded: string) {
    const tenant = await newTenant(h);
    await identify(t, tenant, { userId, traits: { plan: 'pro' } });
    const reply = await getRaw(tenant, encoded);
    t.is(reply.status, 200, reply.text);
    t.is(reply.json.user_id, userId);
    t.deepEqual(reply.json.fields, { plan: 'pro' });
  },
  title: (provided = '', userId: string, encoded: string) => `user ID ${JSON.stringify(userId)} is found as ${encoded}${provided ? ` (${provided})` : ''}`,
});

test(encodedLookup, 'team/ann', 'team%2Fann');
test(encodedLookup, 'ann@example.com', 'ann%40example.com');
test(encodedLookup, 'a/b@c/d', 'a%2Fb%40c%2Fd');
test('lowercase hex', encodedLookup, 'a/b', 'a%2fb');
test(encodedLookup, 'user 1', 'user%201');
test(encodedLookup, 'Zoë?#&=+%', encodeURIComponent('Zoë?#&=+%'));
test(encodedLookup, 'UPPER-case', 'UPPER-case');

test('a user ID with a slash is not found under an unencoded slash (plain-text 404)', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'team/ann', traits: { plan: 'pro' } });
  const reply = await getRaw(tenant, 'team/ann');
  t.is(reply.status, 404);
  t.is(reply.text, NOT_FOUND_TEXT);
});

test('user IDs holding a NUL or a backslash are distinct and round-trip', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'a\u0000b', traits: { which: 'nul' } });
  await identify(t, tenant, { userId: 'a\\0b', traits: { which: 'backslash-zero' } });
  const nul = await getRaw(tenant, 'a%00b');
  const backslash = await getRaw(tenant, 'a%5C0b');
  t.is(nul.status, 200, nul.text);
  t.is(backslash.status, 200, backslash.text);
  t.is(nul.json.user_id, 'a\u0000b');
  t.deepEqual(nul.json.fields, { which: 'nul' });
  t.is(backslash.json.user_id, 'a\\0b');
  t.deepEqual(backslash.json.fields, { which: 'backslash-zero' });
  t.not(nul.json.profile_id, backslash.json.profile_id);
});

test('lookup is by the trimmed user ID: %20u1%20 finds u1, user_id is the decoded path value', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { plan: 'pro' } });
  const plain = await getRaw(tenant, 'u1');
  const padded = await getRaw(tenant, '%20u1%20');
  t.is(padded.status, 200, padded.text);
  t.is(padded.json.user_id, ' u1 ');
  t.is(padded.json.profile_id, plain.json.profile_id);
  t.deepEqual(padded.json.fields, { plan: 'pro' });
});

test('a user saved with spaces around its ID is found by the trimmed ID', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: '  u1  ', traits: { plan: 'pro' } });
  const reply = await getRaw(tenant, 'u1');
  t.is(reply.status, 200, reply.text);
  t.is(reply.json.user_id, 'u1');
});

// --- 404 ---

test('an unknown user: 404 {error: Profile not found} as JSON', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { plan: 'pro' } });
  assertNotFound(t, await getRaw(tenant, 'u2'));
  assertNotFound(t, await getRaw(tenant, 'U1'));
  assertNotFound(t, await getRaw(tenant, '%20'));
});

test('never looked up by email', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  await identify(t, tenant, { userId: 'u1', traits: { email: 'ann@example.com' } });
  assertNotFound(t, await getRaw(tenant, 'ann%40example.com'));
  assertNotFound(t, await getRaw(tenant, 'ann@example.com'));
});

test('an empty user ID (/api/profiles/{slug}/) is the plain-text 404', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { plan: 'pro' } });
  const reply = await getRaw(tenant, '');
  t.is(reply.status, 404);
  t.is(reply.text, NOT_FOUND_TEXT);
  t.regex(reply.headers.get('content-type') ?? '', /^text\/plain\b/);
});

test('a trailing slash after the user ID and other methods are the plain-text 404', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { plan: 'pro' } });
  const headers = { 'x-api-key': tenant.key };
  const replies = [
    await request(gateway.url, `/api/profiles/${tenant.slug}/u1/`, { method: 'GET', headers }),
    await request(gateway.url, `/api/profiles/${tenant.slug}/u1`, { method: 'POST', headers, body: {} }),
    await request(gateway.url, `/api/profiles/${tenant.slug}/u1`, { method: 'DELETE', headers }),
    await request(gateway.url, `/api/profiles/${tenant.slug}`, { method: 'GET', headers }),
    await request(gateway.url, `/api/profiles/${tenant.slug}/u1/extra`, { method: 'GET', headers }),
  ];
  for (const reply of replies) {
    t.is(reply.status, 404);
    t.is(reply.text, NOT_FOUND_TEXT);
  }
});

test('HEAD is a different method: the plain-text 404, for an existing user too', async (t) => {
  const tenant = await newTenant(h);
  await identify(t, tenant, { userId: 'u1', traits: { plan: 'pro' } });
  const reply = await request(gateway.url, `/api/profiles/${tenant.slug}/u1`, { method: 'HEAD', headers: { 'x-api-key': tenant.key } });
  t.is(reply.status, 404);
  t.regex(reply.headers.get('content-type') ?? '', /^text\/plain\b/);
  t.is(reply.text, '');
  // GET still answers.
  t.is((await getRaw(tenant, 'u1')).status, 200);
});

// --- Consistency and environments ---

test('a read right after a 200 Identify sees its change', async (t) => {
  const tenant = await newTenant(h);
  for (let i = 0; i < 5; i++) {
    await identify(t, tenant, { userId: `u${i}`, traits: { n: i } });
    const fresh = await getRaw(tenant, `u${i}`);
    t.is(fresh.status, 200, fresh.text);
    t.deepEqual(fresh.json.fields, { n: i });
    await identify(t, tenant, { userId: `u${i}`, traits: { n: i + 100 } });
    t.deepEqual((await getRaw(tenant, `u${i}`)).json.fields, { n: i + 100 });
  }
});

test('environments are separate: the same user ID in another environment is 404 there', async (t) => {
  const tenant = await newTenant(h);
  const other = await nonProduction(tenant);
  await identify(t, tenant, { userId: 'u1', traits: { where: 'production' } });
  assertNotFound(t, await getRaw(other, 'u1'));
  await identify(t, other, { userId: 'u1', traits: { where: 'testing' } });
  const [prod, test_] = [await getRaw(tenant, 'u1'), await getRaw(other, 'u1')];
  t.is(prod.json.org_slug, tenant.slug);
  t.deepEqual(prod.json.fields, { where: 'production' });
  t.is(test_.json.org_slug, other.pathValue);
  t.deepEqual(test_.json.fields, { where: 'testing' });
  t.not(prod.json.profile_id, test_.json.profile_id);
});

test('a non-production environment only: Production has no such profile', async (t) => {
  const tenant = await newTenant(h);
  const other = await nonProduction(tenant);
  await identify(t, other, { userId: 'only-here', traits: { a: 1 } });
  assertNotFound(t, await getRaw(tenant, 'only-here'));
  t.is((await getRaw(other, 'only-here')).status, 200);
});

test('organizations are separate', async (t) => {
  const [a, b] = await Promise.all([newTenant(h), newTenant(h)]);
  await identify(t, a, { userId: 'u1', traits: { a: 1 } });
  assertNotFound(t, await getRaw(b, 'u1'));
});
