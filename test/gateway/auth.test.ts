// Authentication and environment selection over HTTP, written once as a suite over an
// endpoint and run against Track, Identify and Profiles.
import { randomBytes } from 'node:crypto';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import test from 'ava';
import { limitConcurrency } from '../helpers/throttle.ts';
import type { ExecutionContext } from 'ava';
import { keyCreate, keyRevoke } from '../../cli/commands/key.ts';
import { envRemove } from '../../cli/commands/env.ts';
import { journeyCreate, journeyList, journeyPublish } from '../../cli/commands/journey.ts';
import { generateApiKey } from '../../environments/api-key.ts';
import { applyIdentify } from '../../identify/identify-batch.ts';
import { MESSAGES } from '../../gateway/errors.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import { request, trackBody, type Reply } from '../helpers/http.ts';
import { harnessWithGateway, type InProcessGateway, spawnIntake } from '../helpers/processes.ts';
import { newEnvironment, newTenant, type Harness } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

harnessWithGateway(test, (...opened) => ([h, gateway] = opened));

// The suite runs three times (about 170 tests); see limitConcurrency.
limitConcurrency(test, 12);

interface Endpoint {
  name: string;
  method: 'POST' | 'GET';
  /** The endpoint's path for a path value (Production: the organization slug). */
  path: (pathValue: string) => string;
  /** A body the endpoint accepts (POST endpoints). */
  validBody?: () => unknown;
  /** A body that fails the endpoint's validation with a 400 (POST endpoints). */
  invalidBody?: () => unknown;
  /** Status of an authorized request with the valid body. */
  okStatus: number;
  /** A body refused for its size (Track's 413), which would also fail validation. */
  tooLarge?: { body: () => unknown; status: number; error: string };
  /** A valid body over 1 MB that the endpoint accepts (Identify has no size limit). */
  largeBody?: () => unknown;
  /** Makes the OK outcome possible in an environment before the first call there (Profiles: the user exists). */
  prepare?: (pathValue: string) => Promise<void>;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const xApiKey = (key: string) => ({ 'x-api-key': key });
const envHeader = (value: string) => ({ 'x-service-environment': value });

function assertError(t: ExecutionContext, reply: Reply, status: number, error: string): void {
  t.is(reply.status, status, reply.text);
  t.deepEqual(reply.json, { error });
}

function authSuite(endpoint: Endpoint): void {
  const call = async (pathValue: string, headers: Record<string, string>, body: unknown = endpoint.validBody?.(), url = gateway.url) => {
    await endpoint.prepare?.(pathValue);
    return request(url, endpoint.path(pathValue), { method: endpoint.method, headers, body });
  };
  const assertOk = (t: ExecutionContext, reply: Reply) => t.is(reply.status, endpoint.okStatus, reply.text);
  const title = (s: string) => `${endpoint.name}: ${s}`;

  // --- {org_slug} format (check 2) ---

  const slugRejected = test.macro({
    async exec(t, pathValue: (slug: string) => string) {
      const tenant = await newTenant(h);
      assertError(t, await call(pathValue(tenant.slug), xApiKey(tenant.key)), 400, MESSAGES.invalidOrgSlug);
    },
    title: (provided = '') => title(`slug ${provided} -> 400 Invalid org slug`),
  });

  test('with an uppercase letter', slugRejected, (s) => s.toUpperCase());
  test('with one uppercase letter', slugRejected, (s) => `${s}X`);
  test('of 64 characters', slugRejected, () => 'a'.repeat(64));
  test('with a leading hyphen', slugRejected, (s) => `-${s}`);
  test('with a trailing hyphen', slugRejected, (s) => `${s}-`);
  test('with a leading underscore', slugRejected, (s) => `_${s}`);
  test('with a dot', slugRejected, (s) => `${s}.x`);
  test('%41 (decoded to an uppercase A)', slugRejected, (s) => `%41${s}`);

  const slugWellFormed = test.macro({
    async exec(t, pathValue: string) {
      // The tenant's Production key does not belong to this path value: past the format check, 403.
      const tenant = await newTenant(h);
      assertError(t, await call(pathValue, xApiKey(tenant.key)), 403, MESSAGES.forbidden);
    },
    title: (provided = '') => title(`slug ${provided} is well-formed (403 for another environment's key, not 400)`),
  });

  test('of 63 characters', slugWellFormed, `a${'-'.repeat(61)}z`);
  test('of 1 character', slugWellFormed, '7');
  test('with an underscore', slugWellFormed, `x_${randomBytes(4).toString('hex')}`);

  test(title('a non-production path value with an underscore works with its key and header'), async (t) => {
    const tenant = await newTenant(h);
    const env = await newEnvironment(h, tenant);
    t.true(env.pathValue.includes('_'));
    assertOk(t, await call(env.pathValue, { ...xApiKey(env.key), ...envHeader(env.envKey) }));
  });

  // --- X-Service-Environment (check 3) ---

  const headerRejected = test.macro({
    async exec(t, value: string, status: number, error: string) {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, { ...xApiKey(tenant.key), ...envHeader(value) }), status, error);
    },
    title: (provided = '', value: string, status: number, error: string) =>
      title(`environment header ${provided || JSON.stringify(value)} -> ${status} ${error}`),
  });

  test(headerRejected, 'production', 403, MESSAGES.forbidden);
  test('empty', headerRejected, '', 400, MESSAGES.invalidEnvironment);
  test(headerRejected, 'Prod', 400, MESSAGES.invalidEnvironment);
  test(headerRejected, 'PROD', 400, MESSAGES.invalidEnvironment);
  test('of 33 characters', headerRejected, 'e'.repeat(33), 400, MESSAGES.invalidEnvironment);
  test('with an underscore', headerRejected, 'test_env', 400, MESSAGES.invalidEnvironment);
  test('with a space', headerRejected, 'test env', 400, MESSAGES.invalidEnvironment);
  // Well-formed but naming no environment of the key: a mismatch, not a format error.
  test('of 32 characters', headerRejected, 'e'.repeat(32), 403, MESSAGES.forbidden);

  test(title('environment header prod works like no header'), async (t) => {
    const tenant = await newTenant(h);
    assertOk(t, await call(tenant.slug, { ...xApiKey(tenant.key), ...envHeader('prod') }));
    assertOk(t, await call(tenant.slug, xApiKey(tenant.key)));
  });

  // --- Key transport and precedence (check 4) ---

  const keyAccepted = test.macro({
    async exec(t, headers: (key: string) => Record<string, string>) {
      const tenant = await newTenant(h);
      assertOk(t, await call(tenant.slug, headers(tenant.key)));
    },
    title: (provided = '') => title(`key in ${provided} is accepted`),
  });

  test('X-Api-Key', keyAccepted, (key) => xApiKey(key));
  test('Authorization: Bearer', keyAccepted, (key) => ({ authorization: `Bearer ${key}` }));
  test('Authorization: Basic base64(key:)', keyAccepted, (key) => ({ authorization: `Basic ${b64(`${key}:`)}` }));
  test('Authorization: Basic base64(key:password) (password ignored)', keyAccepted, (key) => ({ authorization: `Basic ${b64(`${key}:anything`)}` }));
  test('Authorization: Basic base64(key) without a colon', keyAccepted, (key) => ({ authorization: `Basic ${b64(key)}` }));
  test('a blank X-Api-Key with a valid Bearer', keyAccepted, (key) => ({ 'x-api-key': '   ', authorization: `Bearer ${key}` }));

  const keyRefused = test.macro({
    async exec(t, headers: (key: string) => Record<string, string>, error: string) {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, headers(tenant.key)), 401, error);
    },
    title: (provided = '', _headers: unknown, error: string) => title(`${provided} -> 401 ${error}`),
  });

  test(
    'a wrong X-Api-Key with a valid Bearer',
    keyRefused,
    (key) => ({ 'x-api-key': generateApiKey(), authorization: `Bearer ${key}` }),
    MESSAGES.invalidApiKey,
  );
  test(
    'a wrong X-Api-Key with a valid Basic',
    keyRefused,
    (key) => ({ 'x-api-key': 'nope', authorization: `Basic ${b64(`${key}:`)}` }),
    MESSAGES.invalidApiKey,
  );
  test('no key', keyRefused, () => ({}), MESSAGES.missingApiKey);
  test('a blank X-Api-Key and no Authorization', keyRefused, () => ({ 'x-api-key': '   ' }), MESSAGES.missingApiKey);
  test('Bearer without a token', keyRefused, () => ({ authorization: 'Bearer ' }), MESSAGES.missingApiKey);
  test('Basic with an empty username', keyRefused, () => ({ authorization: `Basic ${b64(':')}` }), MESSAGES.missingApiKey);
  test('Basic with a credential that is not base64', keyRefused, () => ({ authorization: 'Basic !!!' }), MESSAGES.invalidApiKey);
  test('an unknown key', keyRefused, () => xApiKey(generateApiKey()), MESSAGES.invalidApiKey);
  test('a truncated key', keyRefused, (key) => xApiKey(key.slice(0, -1)), MESSAGES.invalidApiKey);
  test('the key prefix alone', keyRefused, (key) => xApiKey(key.slice(0, 4)), MESSAGES.invalidApiKey);
  test('a key with a character changed', keyRefused, (key) => xApiKey(key.slice(0, -1) + (key.endsWith('a') ? 'b' : 'a')), MESSAGES.invalidApiKey);
  test('an unknown Bearer key', keyRefused, () => ({ authorization: `Bearer ${generateApiKey()}` }), MESSAGES.invalidApiKey);

  test(title('a revoked key is refused at once by every gateway, including ones that cached it'), async (t) => {
    const tenant = await newTenant(h);
    const second = await spawnIntake('gateway', h.env);
    t.teardown(() => second.kill('SIGKILL'));
    // Several rounds: the window in which a gateway could still serve a cached key is short.
    for (let round = 0; round < 10; round++) {
      const { key, suffix } = round === 0 ? tenant : await keyCreate(h.operator, [tenant.slug]);
      const headers = xApiKey(key);
      // Both gateways have now looked the key up (and cached it).
      for (let i = 0; i < 2; i++) {
        assertOk(t, await call(tenant.slug, headers));
        assertOk(t, await call(tenant.slug, headers, undefined, second.url));
      }
      await keyRevoke(h.operator, [tenant.slug, suffix]);
      const [here, there] = await Promise.all([call(tenant.slug, headers), call(tenant.slug, headers, undefined, second.url)]);
      assertError(t, here, 401, MESSAGES.invalidApiKey);
      assertError(t, there, 401, MESSAGES.invalidApiKey);
      // And it stays refused (nothing re-cached the key as active).
      assertError(t, await call(tenant.slug, { authorization: `Bearer ${key}` }, undefined, second.url), 401, MESSAGES.invalidApiKey);
    }
  });

  // --- Key, path value and header name one live environment (check 5) ---

  test(title('a removed environment is refused at once, even with its valid key'), async (t) => {
    const tenant = await newTenant(h);
    const env = await newEnvironment(h, tenant);
    const headers = { ...xApiKey(env.key), ...envHeader(env.envKey) };
    assertOk(t, await call(env.pathValue, headers));
    const file = path.join(await mkdtemp(path.join(tmpdir(), 'intake-auth-')), 'j.json');
    await writeFile(file, JSON.stringify({ name: 'j', entry: { event: 'Signed Up' }, steps: [] }));
    const journey = await journeyCreate(h.operator, [tenant.slug, '--file', file, '--env', env.pathValue]);
    await envRemove(h.operator, [tenant.slug, env.pathValue]);
    assertError(t, await call(env.pathValue, headers), 403, MESSAGES.forbidden);
    // Production of the same organization is unaffected.
    assertOk(t, await call(tenant.slug, xApiKey(tenant.key)));
    // Operators cannot add to it either; what it holds stays readable.
    const removed = { message: `environment ${env.pathValue} is removed` };
    await t.throwsAsync(keyCreate(h.operator, [tenant.slug, '--env', env.pathValue]), removed);
    await t.throwsAsync(journeyCreate(h.operator, [tenant.slug, '--file', file, '--env', env.pathValue]), removed);
    await t.throwsAsync(journeyPublish(h.operator, [tenant.slug, journey.id, '--env', env.pathValue]), removed);
    t.is((await journeyList(h.operator, [tenant.slug, '--env', env.pathValue])).length, 1);
  });

  type Mismatch = (
    tenant: Awaited<ReturnType<typeof newTenant>>,
    env: Awaited<ReturnType<typeof newEnvironment>>,
  ) => { pathValue: string; headers: Record<string, string> };

  const forbidden = test.macro({
    async exec(t, mismatch: Mismatch) {
      const tenant = await newTenant(h);
      const env = await newEnvironment(h, tenant);
      const { pathValue, headers } = mismatch(tenant, env);
      assertError(t, await call(pathValue, headers), 403, MESSAGES.forbidden);
    },
    title: (provided = '') => title(`${provided} -> 403 Forbidden`),
  });

  test('a non-production key on the Production path without header', forbidden, (tenant, env) => ({ pathValue: tenant.slug, headers: xApiKey(env.key) }));
  test('a non-production key on the Production path with header prod', forbidden, (tenant, env) => ({
    pathValue: tenant.slug,
    headers: { ...xApiKey(env.key), ...envHeader('prod') },
  }));
  test('a non-production key on its path value without header', forbidden, (_tenant, env) => ({ pathValue: env.pathValue, headers: xApiKey(env.key) }));
  test('a non-production key with its header on the Production path', forbidden, (tenant, env) => ({
    pathValue: tenant.slug,
    headers: { ...xApiKey(env.key), ...envHeader(env.envKey) },
  }));
  test('a Production key with a non-production header', forbidden, (tenant, env) => ({
    pathValue: tenant.slug,
    headers: { ...xApiKey(tenant.key), ...envHeader(env.envKey) },
  }));
  test('a Production key on a non-production path value and header', forbidden, (tenant, env) => ({
    pathValue: env.pathValue,
    headers: { ...xApiKey(tenant.key), ...envHeader(env.envKey) },
  }));

  test(title("another organization's key -> 403 Forbidden"), async (t) => {
    const [a, b] = await Promise.all([newTenant(h), newTenant(h)]);
    assertError(t, await call(b.slug, xApiKey(a.key)), 403, MESSAGES.forbidden);
    assertOk(t, await call(a.slug, xApiKey(a.key)));
  });

  // --- Order of the checks (product.md: route, slug, header, key, binding, body) ---

  test(title('order: bad slug and missing key -> 400 Invalid org slug'), async (t) => {
    assertError(t, await call('Bad-Slug', {}), 400, MESSAGES.invalidOrgSlug);
  });

  test(title('order: bad slug and bad environment header -> 400 Invalid org slug'), async (t) => {
    assertError(t, await call('-bad', envHeader('Prod')), 400, MESSAGES.invalidOrgSlug);
  });

  test(title('order: bad environment header and missing key -> 400 Invalid environment'), async (t) => {
    const tenant = await newTenant(h);
    assertError(t, await call(tenant.slug, envHeader('Prod')), 400, MESSAGES.invalidEnvironment);
  });

  test(title('order: header production and missing key -> 403 Forbidden'), async (t) => {
    const tenant = await newTenant(h);
    assertError(t, await call(tenant.slug, envHeader('production')), 403, MESSAGES.forbidden);
  });

  test(title('order: header production and an unknown key -> 403 Forbidden'), async (t) => {
    const tenant = await newTenant(h);
    assertError(t, await call(tenant.slug, { ...xApiKey(generateApiKey()), ...envHeader('production') }), 403, MESSAGES.forbidden);
  });

  test(title('order: invalid key and wrong environment -> 401 Invalid API key'), async (t) => {
    const tenant = await newTenant(h);
    const env = await newEnvironment(h, tenant);
    assertError(t, await call(tenant.slug, { ...xApiKey(generateApiKey()), ...envHeader(env.envKey) }), 401, MESSAGES.invalidApiKey);
  });

  if (endpoint.invalidBody) {
    const invalidBody = endpoint.invalidBody;

    test(title('the invalid body used below is refused with 400 when authorized'), async (t) => {
      const tenant = await newTenant(h);
      const reply = await call(tenant.slug, xApiKey(tenant.key), invalidBody());
      t.is(reply.status, 400, reply.text);
    });

    test(title('order: missing key and invalid body -> 401 Missing API key'), async (t) => {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, {}, invalidBody()), 401, MESSAGES.missingApiKey);
    });

    test(title('order: missing key and a body that is not JSON -> 401 Missing API key'), async (t) => {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, {}, '{not json'), 401, MESSAGES.missingApiKey);
    });

    test(title('order: forbidden and invalid body -> 403 Forbidden'), async (t) => {
      const tenant = await newTenant(h);
      const env = await newEnvironment(h, tenant);
      assertError(t, await call(tenant.slug, xApiKey(env.key), invalidBody()), 403, MESSAGES.forbidden);
    });
  }

  if (endpoint.largeBody) {
    const largeBody = endpoint.largeBody;

    test(title('a valid body over 1 MB is not refused for its size'), async (t) => {
      const tenant = await newTenant(h);
      const body = largeBody();
      t.true(Buffer.byteLength(JSON.stringify(body)) > 1_100_000);
      assertOk(t, await call(tenant.slug, xApiKey(tenant.key), body));
    });

    test(title('order: missing key and a body over 1 MB -> 401 Missing API key'), async (t) => {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, {}, largeBody()), 401, MESSAGES.missingApiKey);
    });
  }

  if (endpoint.tooLarge) {
    const tooLarge = endpoint.tooLarge;

    test(title('order: authorized, oversized and invalid body -> size error before validation'), async (t) => {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, xApiKey(tenant.key), tooLarge.body()), tooLarge.status, tooLarge.error);
    });

    test(title('order: missing key and oversized body -> 401 Missing API key'), async (t) => {
      const tenant = await newTenant(h);
      assertError(t, await call(tenant.slug, {}, tooLarge.body()), 401, MESSAGES.missingApiKey);
    });
  }
}

authSuite({
  name: 'Track',
  method: 'POST',
  path: (pathValue) => `/api/track/${pathValue}`,
  validBody: () => trackBody(),
  invalidBody: () => trackBody({ type: 'identify' }),
  okStatus: 202,
  // Over the ~1 MB measure (1.2 MB of letters, well under the raw-body cap), and not a Track call.
  tooLarge: {
    body: () => trackBody({ type: 'identify', properties: { blob: 'x'.repeat(1_200_000) } }),
    status: 413,
    error: MESSAGES.trackTooLarge,
  },
});

authSuite({
  name: 'Identify',
  method: 'POST',
  path: (pathValue) => `/api/identify/${pathValue}`,
  validBody: () => ({ userId: 'user-1', traits: { plan: 'pro' } }),
  invalidBody: () => ({ userId: 42, traits: { plan: 'pro' } }),
  okStatus: 200,
  // 1.2 MB raw (each quote is 2 bytes escaped), over Track's ~1 MB measure; Identify sets no limit.
  largeBody: () => ({ userId: 'user-1', traits: { blob: 'x'.repeat(600_000), quotes: '"'.repeat(300_000) } }),
});

/** Profiles answers 200 only for an existing user: create it once per environment, through the store. */
const seeded = new Map<string, Promise<void>>();
function seedProfile(pathValue: string): Promise<void> {
  let done = seeded.get(pathValue);
  if (!done) {
    done = (async () => {
      const env = await h.db.environment.findUnique({ where: { pathValue } });
      if (!env) return;
      await applyIdentify(h.db, { id: env.id, features: [] }, identifyInput('user-1', { plan: 'pro' }), Date.now());
    })();
    seeded.set(pathValue, done);
  }
  return done;
}

authSuite({
  name: 'Profiles',
  method: 'GET',
  path: (pathValue) => `/api/profiles/${pathValue}/user-1`,
  okStatus: 200,
  prepare: seedProfile,
});
