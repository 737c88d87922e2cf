// Property-based fuzzing of the three endpoints over real HTTP against one in-process gateway:
// near-valid and arbitrary JSON bodies, raw text and bytes, header values and path segments.
// Whatever is sent, the gateway answers (never a crash, never a 5xx with its dependencies up),
// every non-2xx is one of the spec's error shapes (spec-errors.ts), and the answer is what the
// spec's text says for that input (spec-track.ts, spec-identify.ts): 2xx only for valid input.
import { isUtf8 } from 'node:buffer';
import test from 'ava';
import fc from 'fast-check';
import { request } from '../helpers/http.ts';
import { gatewayInProcess } from '../helpers/processes.ts';
import { newEnvironment, newTenant, openHarness, type Harness, type Tenant, closeEmptied } from '../helpers/services.ts';
import { anyJson, headerValue, identifyLike, pathSegment, rawBody, trackLike, whitespace } from './arbitraries.ts';
import { rawClient, type RawReply } from './client.ts';
import { expectIdentify, expectOneOf, expectPlainNotFound, expectSpecShape, Mismatch } from './expect.ts';
import type { Endpoint } from './spec-errors.ts';
import { specIdentify, type IdentifyExpectation } from './spec-identify.ts';
import { specTrack, type Expectation } from './spec-track.ts';

/** About 8,000 requests in all (about 15 s here); FUZZ_SCALE=0.1 for a quick run, 10 for a long one. */
const SCALE = Number(process.env.FUZZ_SCALE ?? 1);
const runs = (n: number) => Math.max(1, Math.round(n * SCALE));

let h: Harness;
let gateway: Awaited<ReturnType<typeof gatewayInProcess>>;
let client: ReturnType<typeof rawClient>;
let tenant: Tenant;
let other: Awaited<ReturnType<typeof newEnvironment>>;

test.before(async () => {
  h = await openHarness();
  gateway = await gatewayInProcess(h);
  client = rawClient(gateway.url);
  tenant = await newTenant(h);
  other = await newEnvironment(h, tenant);
});

test.after.always(async () => {
  client?.close();
  await gateway?.close();
  // The accepted Track events of this file have no worker: drop its queue.
  await closeEmptied(h);
});

const json = (value: unknown) => ({ 'content-type': 'application/json', 'x-api-key': tenant.key, body: JSON.stringify(value) });
const post = (path: string, headers: Record<string, string>, body: string | Buffer) => client.send({ method: 'POST', path, headers, body });

const trackAccepted =
  (body: unknown) =>
  (reply: RawReply): string | null => {
    const messageId = (body as { messageId?: unknown }).messageId;
    return reply.status === 202 && JSON.stringify(reply.json) === JSON.stringify({ message_id: messageId, status: 'accepted' })
      ? null
      : `202 {message_id: ${JSON.stringify(messageId)}, status: accepted}`;
  };
const anySuccess = (status: number) => (reply: RawReply) => (reply.status === status ? null : `${status}`);

/**
 * The value the service parses from a body, or NOT_JSON; a leading BOM may be ignored (RFC 8259) or
 * not. Bytes that are not UTF-8 are not JSON (RFC 8259 §8.1), whatever a lenient decoder would read.
 */
const NOT_JSON = Symbol('not JSON');
function parsings(body: string | Buffer): (unknown | typeof NOT_JSON)[] {
  // What goes on the wire: a string as UTF-8 (the client writes an unpaired surrogate as U+FFFD).
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8');
  if (!isUtf8(bytes)) return [NOT_JSON];
  const text = bytes.toString('utf8');
  const parse = (s: string) => {
    try {
      return JSON.parse(s);
    } catch {
      return NOT_JSON;
    }
  };
  return text.startsWith('\ufeff') ? [parse(text), parse(text.slice(1))] : [parse(text)];
}

test.serial('Track: bodies around the valid one and arbitrary JSON get exactly the spec answer', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.oneof({ weight: 4, arbitrary: trackLike }, { weight: 1, arbitrary: anyJson }), async (value) => {
      const { body, ...headers } = json(value);
      const parsed = JSON.parse(body);
      const reply = await post(`/api/track/${tenant.slug}`, headers, body);
      expectOneOf('track', reply, specTrack(parsed), trackAccepted(parsed));
    }),
    { numRuns: runs(2000), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

test.serial('Track: raw text and bytes are Invalid JSON unless they parse, then the spec answer', async (t) => {
  await fc.assert(
    fc.asyncProperty(rawBody, async (bytes) => {
      const reply = await post(`/api/track/${tenant.slug}`, { 'x-api-key': tenant.key }, bytes);
      const parsed = parsings(bytes);
      const allowed: Expectation[] = parsed.flatMap((p) =>
        p === NOT_JSON ? [{ kind: 'error' as const, status: 400, body: { error: 'Invalid JSON' } }] : specTrack(p),
      );
      // The success body echoes the messageId exactly as sent: bytes are decoded, never replaced.
      const echoes = (r: RawReply) => (parsed.some((p) => p !== NOT_JSON && trackAccepted(p)(r) === null) ? null : '202 echoing the messageId sent');
      expectOneOf('track', reply, allowed, echoes);
    }),
    { numRuns: runs(600), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

let unique = 0;
const nextId = () => `fz${Date.now().toString(36)}-${++unique}-`;

test.serial('Identify: bodies around the valid one and arbitrary JSON get the spec answer', async (t) => {
  const seen = new Set<string>();
  await fc.assert(
    fc.asyncProperty(fc.oneof({ weight: 5, arbitrary: identifyLike(nextId) }, { weight: 1, arbitrary: anyJson }), async (value) => {
      const { body, ...headers } = json(value);
      const parsed = JSON.parse(body);
      const expected = specIdentify(parsed, Date.now());
      const reply = await post(`/api/identify/${tenant.slug}`, headers, body);
      const messageId = typeof parsed?.messageId === 'string' ? (parsed.messageId as string) : undefined;
      expectIdentify(reply, expected, messageId, messageId !== undefined && seen.has(messageId.trim()));
      if (reply.status === 200 && messageId !== undefined) seen.add(messageId.trim());
    }),
    { numRuns: runs(1500), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

// Inputs this fuzz shrinks to, kept as plain tests (profiles/profile-store.ts,
// platform/pg-text.ts, consent.ts): unpaired surrogates in traits (jsonb refuses them),
// U+0000 in a consent's proofRef or address (text columns refuse it), and consent times beyond
// PostgreSQL's bigint range, none of them a 500.
test('Identify: a trait with an unpaired surrogate is stored and read back exactly', async (t) => {
  const body = '{"userId":"lone-surrogate","traits":{"a":"\\ud800","\\udfff":1}}';
  const reply = await post(`/api/identify/${tenant.slug}`, { 'x-api-key': tenant.key }, body);
  t.is(reply.status, 200, reply.text);
  // A later ordinary call for the same person (the one-round-trip path, which reads the stored
  // profile as jsonb) still applies.
  const later = await post(`/api/identify/${tenant.slug}`, { 'x-api-key': tenant.key }, '{"userId":"lone-surrogate","traits":{"b":2}}');
  t.is(later.status, 200, later.text);
  const profile = await client.send({ method: 'GET', path: `/api/profiles/${tenant.slug}/lone-surrogate`, headers: { 'x-api-key': tenant.key } });
  t.deepEqual((profile.json as { fields?: unknown }).fields, { a: '\ud800', '\udfff': 1, b: 2 });
});

test('Identify: consent with U+0000 in its proofRef or address is not a 500', async (t) => {
  const decision = { channel: 'email', status: 'granted', basis: 'consent', consentedAt: 0 };
  for (const body of [
    { userId: 'nul-proof', traits: { email: 'a@example.com' }, consent: [{ ...decision, proofRef: 'form\u0000' }] },
    { userId: 'nul-address', traits: { email: 'b\u0000@example.com' }, consent: [decision] },
  ]) {
    const reply = await post(`/api/identify/${tenant.slug}`, { 'x-api-key': tenant.key }, JSON.stringify(body));
    t.not(reply.status, 500, JSON.stringify(body));
  }
});

test('Identify: a consent expiresAt beyond any date is not a 500', async (t) => {
  const body = { userId: 'huge-expiry', traits: { email: 'c@example.com' }, consent: [{ channel: 'email', status: 'withdrawn', expiresAt: 1e20 }] };
  const reply = await post(`/api/identify/${tenant.slug}`, { 'x-api-key': tenant.key }, JSON.stringify(body));
  t.not(reply.status, 500, reply.text);
});

test.serial('Identify: raw text and bytes answer Expected object, received null unless they parse', async (t) => {
  await fc.assert(
    fc.asyncProperty(rawBody, async (bytes) => {
      const reply = await post(`/api/identify/${tenant.slug}`, { 'x-api-key': tenant.key }, bytes);
      const verdicts = parsings(bytes).map((p): IdentifyExpectation =>
        p === NOT_JSON ? { kind: 'invalid', mustInclude: [{ path: [], message: 'Expected object, received null' }] } : specIdentify(p, Date.now()),
      );
      const errors: string[] = [];
      for (const v of verdicts) {
        try {
          return expectIdentify(reply, v, undefined, true);
        } catch (err) {
          errors.push((err as Error).message);
        }
      }
      throw new Mismatch(errors.join('; or '));
    }),
    { numRuns: runs(400), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

// --- paths -------------------------------------------------------------------------------

/** The spec's slug / path-value format (underscores allowed: non-production path values may have them). */
const SLUG = /^(?=[a-z0-9_-]{1,63}$)[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?$/;

function decode(segment: string): string | null {
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}

/** Variants of a known value as a path segment: as is, fully or partly percent-encoded, with case-changed escapes. */
const encodedVariants = (value: string) =>
  fc.oneof(
    fc.constant(encodeURIComponent(value)),
    fc.constant([...value].map((c) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0')).join('')),
    fc.constant(encodeURIComponent(value).replaceAll('%2F', '%2f')),
  );

/**
 * A segment no route can match: empty, or with a `/` (more segments), or with a raw byte no URL
 * holds (DEL or above: unencoded non-ASCII; the spec says IDs must be URL-encoded).
 */
const unmatchable = (segment: string) => segment === '' || segment.includes('/') || /[\x7f-\xff]/.test(segment);

/** Path-value outcome for the tenant's Production key: null when the slug names its environment. */
function slugOutcome(segment: string, slug = tenant.slug): Expectation | 'plain404' | null {
  if (unmatchable(segment)) return 'plain404';
  // Escapes that do not decode as UTF-8 name no path value.
  const value = decode(segment);
  if (value === null || !SLUG.test(value)) return { kind: 'error', status: 400, body: { error: 'Invalid org slug' } };
  if (value !== slug) return { kind: 'error', status: 403, body: { error: 'Forbidden' } };
  return null;
}

const slugSegment = (slug = tenant.slug) =>
  fc.oneof({ weight: 2, arbitrary: fc.constant(slug) }, { weight: 1, arbitrary: encodedVariants(slug) }, { weight: 3, arbitrary: pathSegment });

test.serial('Track and Identify: arbitrary path segments as {org_slug}', async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.constantFrom<Endpoint>('track', 'identify'), slugSegment(), async (endpoint, segment) => {
      const body =
        endpoint === 'track'
          ? { type: 'track', messageId: nextId(), event: 'E', userId: 'u', timestamp: '2024-05-01T10:00:00Z' }
          : { userId: 'u', traits: { a: 1 } };
      const reply = await post(`/api/${endpoint}/${segment}`, { 'x-api-key': tenant.key }, JSON.stringify(body));
      const outcome = slugOutcome(segment);
      if (outcome === 'plain404') return expectPlainNotFound(reply);
      const success = endpoint === 'track' ? trackAccepted(body) : anySuccess(200);
      expectOneOf(endpoint, reply, [outcome ?? { kind: 'accepted' }], success);
    }),
    { numRuns: runs(600), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

test.serial('Profiles: arbitrary path segments and percent-encodings as {org_slug} and {user_id}', async (t) => {
  // A tenant of its own (no other test makes its profiles), whose user IDs need encoding; the
  // trimmed ID is what is stored and looked up.
  const reader = await newTenant(h);
  const known = ['a/b', 'ü ñ', '%41', ' spaced ', 'x@y.z', '😀', 'a?b#c', '..', 'tab\there', 'quote\'"', '+plus+', '東京'];
  for (const userId of known) {
    const r = await request(gateway.url, `/api/identify/${reader.slug}`, { headers: { 'x-api-key': reader.key }, body: { userId, traits: { n: 1 } } });
    t.is(r.status, 200, r.text);
  }
  const stored = new Set(known.map((u) => u.trim()));
  const userSegment = fc.oneof(
    { weight: 2, arbitrary: fc.constantFrom(...known).chain(encodedVariants) },
    { weight: 1, arbitrary: fc.constantFrom(...known).map((u) => encodeURIComponent(u.trim())) },
    { weight: 4, arbitrary: pathSegment },
    { weight: 1, arbitrary: whitespace.map(encodeURIComponent) },
  );
  await fc.assert(
    fc.asyncProperty(slugSegment(reader.slug), userSegment, async (slugSeg, userSeg) => {
      const reply = await client.send({ method: 'GET', path: `/api/profiles/${slugSeg}/${userSeg}`, headers: { 'x-api-key': reader.key } });
      const slug = slugOutcome(slugSeg, reader.slug);
      if (slug === 'plain404' || unmatchable(userSeg)) return expectPlainNotFound(reply);
      const userId = decode(userSeg);
      if (slug !== null) return expectOneOf('profiles', reply, [slug], anySuccess(200));
      // Escapes that do not decode as UTF-8 name no user ID (never the user named by the raw text).
      if (userId === null) return expectOneOf('profiles', reply, [{ kind: 'error', status: 404, body: { error: 'Profile not found' } }], anySuccess(200));
      if (userId.trim() === '') {
        // An empty user ID is the plain-text 404; one of spaces is a user ID not found (either reading holds).
        if (reply.status === 404 && (reply.text === '404 Not Found' || reply.text === '{"error":"Profile not found"}')) return;
        throw new Mismatch(`blank user ID: ${reply.status} ${reply.text}`);
      }
      const found = (r: RawReply) => {
        const p = r.json as Record<string, unknown>;
        const keys = Object.keys(p ?? {})
          .sort()
          .join(',');
        if (r.status !== 200 || keys !== 'fields,org_slug,profile_id,updated_at,user_id') return '200 with the profile object';
        if (p.org_slug !== reader.slug || p.user_id !== userId || typeof p.profile_id !== 'string' || typeof p.updated_at !== 'number')
          return 'the profile of the decoded user ID';
        return JSON.stringify(p.fields) === '{"n":1}' ? null : 'its fields';
      };
      const expected: Expectation = stored.has(userId.trim()) ? { kind: 'accepted' } : { kind: 'error', status: 404, body: { error: 'Profile not found' } };
      expectOneOf('profiles', reply, [expected], found);
    }),
    { numRuns: runs(1200), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

// --- headers -----------------------------------------------------------------------------

type Auth = { header?: string; key: 'prod' | 'other' | 'invalid' | 'missing' | 'missing-or-invalid' };

test.serial('All three endpoints: arbitrary Content-Type, Authorization, X-Api-Key and X-Service-Environment', async (t) => {
  for (const [path, key, env] of [
    [tenant.slug, tenant.key, undefined],
    [other.pathValue, other.key, other.envKey],
  ] as const) {
    const r = await request(gateway.url, `/api/identify/${path}`, {
      headers: { 'x-api-key': key, ...(env ? { 'x-service-environment': env } : {}) },
      body: { userId: 'hdr-user', traits: { a: 1 } },
    });
    t.is(r.status, 200, r.text);
  }
  const keys = { prod: tenant.key, other: other.key };
  const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
  const keyOf = fc.constantFrom<'prod' | 'other'>('prod', 'other');
  const authorization: fc.Arbitrary<Auth> = fc.oneof(
    fc.constant<Auth>({ key: 'missing' }),
    keyOf.chain((k) =>
      fc.constantFrom<Auth>(
        { header: `Bearer ${keys[k]}`, key: k },
        { header: `bearer  ${keys[k]}`, key: k },
        { header: `Basic ${b64(keys[k] + ':')}`, key: k },
        { header: `Basic ${b64(keys[k] + ':ignored')}`, key: k },
        { header: `Basic ${b64(keys[k])}`, key: k },
        { header: `Token ${keys[k]}`, key: 'missing' },
      ),
    ),
    fc.constantFrom<Auth>(
      { header: 'Bearer', key: 'missing' },
      { header: 'Basic', key: 'missing' },
      { header: `Basic ${b64(':x')}`, key: 'missing' },
      { header: 'Basic !!!', key: 'invalid' },
      { header: 'Bearer itk_nope', key: 'invalid' },
    ),
    headerValue.map((v): Auth => ({ header: v, key: 'missing-or-invalid' })),
  );
  const apiKey = fc.oneof(
    { weight: 3, arbitrary: fc.constant<Auth>({ key: 'missing' }) },
    { weight: 3, arbitrary: keyOf.map((k): Auth => ({ header: keys[k], key: k })) },
    { weight: 1, arbitrary: fc.tuple(keyOf, fc.constantFrom(' ', '\t', '  ')).map(([k, pad]): Auth => ({ header: pad + keys[k] + pad, key: k })) },
    { weight: 1, arbitrary: fc.constantFrom(' ', '\t', '').map((v): Auth => ({ header: v, key: 'missing' })) },
    { weight: 2, arbitrary: headerValue.map((v): Auth => ({ header: v, key: 'missing-or-invalid' })) },
  );
  const environment = fc.oneof(
    { weight: 4, arbitrary: fc.constant<string | undefined>(undefined) },
    { weight: 3, arbitrary: fc.constantFrom('prod', other.envKey) },
    { weight: 1, arbitrary: fc.constantFrom('production', 'Prod', '', ' ', 'a'.repeat(33), 'x'.repeat(32), '-', 'env_1', 'ENV') },
    { weight: 1, arbitrary: headerValue },
  );

  const contentType = fc.oneof(
    fc.constant<string | undefined>(undefined),
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      '',
    ),
    headerValue,
  );

  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom<Endpoint>('track', 'identify', 'profiles'),
      fc.constantFrom<'prod' | 'other'>('prod', 'other'),
      apiKey,
      authorization,
      environment,
      contentType,
      async (endpoint, target, xApiKey, auth, env, type) => {
        const pathValue = target === 'prod' ? tenant.slug : other.pathValue;
        const headers: Record<string, string> = {};
        if (xApiKey.header !== undefined) headers['x-api-key'] = xApiKey.header;
        if (auth.header !== undefined) headers['authorization'] = auth.header;
        if (env !== undefined) headers['x-service-environment'] = env;
        if (type !== undefined) headers['content-type'] = type;
        const body =
          endpoint === 'track'
            ? { type: 'track', messageId: nextId(), event: 'E', userId: 'u', timestamp: '2024-05-01T10:00:00Z' }
            : { userId: 'hdr-user', traits: { a: 1 } };
        const reply =
          endpoint === 'profiles'
            ? await client.send({ method: 'GET', path: `/api/profiles/${pathValue}/hdr-user`, headers })
            : await post(`/api/${endpoint}/${pathValue}`, headers, JSON.stringify(body));

        // Node trims spaces and tabs around header values; the checks run in product.md's order.
        const envValue = env?.replace(/^[ \t]+|[ \t]+$/g, '');
        const outcomes: Expectation[] = [];
        const error = (status: number, message: string): Expectation => ({ kind: 'error', status, body: { error: message } });
        if (envValue !== undefined && envValue === 'production') outcomes.push(error(403, 'Forbidden'));
        else if (envValue !== undefined && !/^[a-z0-9-]{1,32}$/.test(envValue)) outcomes.push(error(400, 'Invalid environment'));
        else {
          const xk = xApiKey.header?.replace(/^[ \t]+|[ \t]+$/g, '');
          const used = xk !== undefined && xk !== '' ? xApiKey : auth;
          if (used.key === 'missing' || used.key === 'missing-or-invalid') outcomes.push(error(401, 'Missing API key'));
          if (used.key === 'invalid' || used.key === 'missing-or-invalid') outcomes.push(error(401, 'Invalid API key'));
          if (used.key === 'prod' || used.key === 'other') {
            const bound = used.key === target && (envValue ?? 'prod') === (target === 'prod' ? 'prod' : other.envKey);
            outcomes.push(bound ? { kind: 'accepted' } : error(403, 'Forbidden'));
          }
        }
        const success = endpoint === 'track' ? trackAccepted(body) : anySuccess(200);
        expectOneOf(endpoint, reply, outcomes, success);
      },
    ),
    { numRuns: runs(1500), includeErrorInReport: true },
  );
  t.log(client.tally());
  t.pass();
});

test.serial('after all of it the gateway still answers', async (t) => {
  const health = await client.send({ method: 'GET', path: '/healthz' });
  t.is(health.status, 200);
  const track = await post(
    `/api/track/${tenant.slug}`,
    { 'x-api-key': tenant.key },
    JSON.stringify({ type: 'track', messageId: nextId(), event: 'E', userId: 'u', timestamp: '2024-05-01T10:00:00Z' }),
  );
  t.is(track.status, 202, track.text);
});
