// POST /api/identify/{org_slug} over HTTP: every row of the spec's "Identify 400 issues"
// table, the merge rules, idempotency by messageId, consent resolution and join by email.
// Every effect is read back through GET /api/profiles or the operator's `consent get`.
import test from 'ava';
import { limitConcurrency } from '../helpers/throttle.ts';
import type { ExecutionContext } from 'ava';
import { consentGet } from '../../cli/commands/consent.ts';
import { orgFeatures } from '../../cli/commands/org.ts';
import type { Issue } from '../../platform/validation/issues.ts';
import { IGNORED_FIELDS, request, type Reply } from '../helpers/http.ts';
import { harnessWithGateway, type InProcessGateway } from '../helpers/processes.ts';
import { newEnvironment, newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

limitConcurrency(test, 12);

harnessWithGateway(test, (...opened) => ([h, gateway] = opened));

// The spec's wording, written out here rather than taken from the product's constants.
const M = {
  invalidCall: 'Invalid Identify call',
  tooFarAhead: 'timestamp cannot be more than 5 minutes in the future',
  profileNotFound: 'Profile not found',
  required: 'Required',
  emptyString: 'String must contain at least 1 character(s)',
  invalidDatetime: 'Invalid datetime',
  before1970: 'Timestamp must be on or after 1970-01-01T00:00:00Z',
  traitsRequired: 'At least one trait is required unless consent is provided',
  consentedAtRequired: 'consentedAt is required for a granted implied-consent basis',
  expiresAtRequired: 'expiresAt is required for a granted implied_contract decision (termination + CASL window)',
  trackingEmailOnly: 'tracking consent applies to the email channel only',
  trackingBasis: "a tracking grant needs basis 'consent'",
} as const;

// --- helpers ---

/** Where a call goes: a path value and the headers that select its environment. */
interface Target {
  pathValue: string;
  headers: Record<string, string>;
  /** The organization slug (consent lookups) and, for a non-production environment, its path value. */
  slug: string;
  env?: string;
}

const production = (tenant: Tenant): Target => ({ pathValue: tenant.slug, headers: { 'x-api-key': tenant.key }, slug: tenant.slug });

async function nonProduction(tenant: Tenant): Promise<Target> {
  const env = await newEnvironment(h, tenant);
  return { pathValue: env.pathValue, headers: { 'x-api-key': env.key, 'x-service-environment': env.envKey }, slug: tenant.slug, env: env.pathValue };
}

const targetOf = (to: Tenant | Target): Target => ('key' in to ? production(to) : to);

function post(to: Tenant | Target, body: unknown): Promise<Reply> {
  const target = targetOf(to);
  return request(gateway.url, `/api/identify/${target.pathValue}`, { headers: target.headers, body });
}

function getProfile(to: Tenant | Target, userId: string): Promise<Reply> {
  const target = targetOf(to);
  return request(gateway.url, `/api/profiles/${target.pathValue}/${encodeURIComponent(userId)}`, { method: 'GET', headers: target.headers });
}

/** POST and assert the 200 body; returns the messageId the service answered with. */
async function send(t: ExecutionContext, to: Tenant | Target, body: Record<string, unknown>, duplicate = false): Promise<string> {
  const reply = await post(to, body);
  t.is(reply.status, 200, reply.text);
  const messageId = typeof body.messageId === 'string' ? body.messageId : reply.json?.messageId;
  t.deepEqual(reply.json, { success: true, messageId, duplicate });
  return messageId;
}

interface Profile {
  org_slug: string;
  user_id: string;
  profile_id: string;
  updated_at: number;
  fields: Record<string, unknown>;
}

async function readProfile(t: ExecutionContext, to: Tenant | Target, userId: string): Promise<Profile> {
  const reply = await getProfile(to, userId);
  t.is(reply.status, 200, `GET profile ${userId}: ${reply.text}`);
  return reply.json as Profile;
}

async function fieldsOf(t: ExecutionContext, to: Tenant | Target, userId: string): Promise<Record<string, unknown>> {
  return (await readProfile(t, to, userId)).fields;
}

async function assertNoProfile(t: ExecutionContext, to: Tenant | Target, userId: string): Promise<void> {
  const reply = await getProfile(to, userId);
  t.is(reply.status, 404, `GET profile ${userId}: ${reply.text}`);
  t.deepEqual(reply.json, { error: M.profileNotFound });
}

/** The resolved decision for an address (operator's `consent get`), or null. */
function consentOf(to: Tenant | Target, channel: 'email' | 'sms', address: string, purpose?: 'marketing' | 'tracking') {
  const target = targetOf(to);
  const argv = [target.slug, channel, address];
  if (purpose) argv.push('--purpose', purpose);
  if (target.env) argv.push('--env', target.env);
  return consentGet(h.operator, argv);
}

async function decisionCount(tenant: Tenant): Promise<number> {
  return h.db.consentDecision.count({ where: { environmentId: tenant.environmentId } });
}

// Fixed times in the past: T(n) is n minutes after 2024-05-01T10:00Z.
const BASE = Date.UTC(2024, 4, 1, 10, 0, 0);
const T = (minutes: number) => BASE + minutes * 60_000;
const iso = (ms: number) => new Date(ms).toISOString();
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

const valid = (overrides: Record<string, unknown> = {}): Record<string, unknown> => {
  const body: Record<string, unknown> = { userId: 'user-1', traits: { plan: 'pro' }, ...overrides };
  for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
  return body;
};

// --- 400: every row of the spec's "Identify 400 issues" table, one line each ---

type Path = (string | number)[];
const required = (path: Path): Issue => ({ code: 'invalid_type', expected: 'string', received: 'undefined', path, message: M.required });
const wrongType = (path: Path, expected: string, received: string): Issue => ({
  code: 'invalid_type',
  expected,
  received,
  path,
  message: `Expected ${expected}, received ${received}`,
});
const tooSmall = (path: Path): Issue => ({ code: 'too_small', minimum: 1, type: 'string', inclusive: true, exact: false, path, message: M.emptyString });
const invalidDatetime: Issue = { code: 'invalid_string', validation: 'datetime', path: ['timestamp'], message: M.invalidDatetime };
const custom = (path: Path, message: string): Issue => ({ code: 'custom', path, message });
const before1970 = custom(['timestamp'], M.before1970);
const traitsRequired = custom(['traits'], M.traitsRequired);

const rejects = test.macro({
  async exec(t, body: unknown, issues: Issue[]) {
    const tenant = await newTenant(h);
    const reply = await post(tenant, body);
    t.is(reply.status, 400, reply.text);
    t.deepEqual(reply.json, { error: M.invalidCall, issues });
    t.regex(reply.headers.get('content-type') ?? '', /^application\/json\b/);
    // Nothing was saved.
    await assertNoProfile(t, tenant, 'user-1');
  },
  title: (provided = '', _body: unknown, issues: Issue[]) => `400 ${provided} -> ${issues.map((i) => `[${i.path.join(',')}] ${i.message}`).join(' ; ')}`,
});

test('userId missing', rejects, valid({ userId: undefined }), [required(['userId'])]);
test('userId null', rejects, valid({ userId: null }), [wrongType(['userId'], 'string', 'null')]);
test('userId a number', rejects, valid({ userId: 42 }), [wrongType(['userId'], 'string', 'number')]);
test('userId empty', rejects, valid({ userId: '' }), [tooSmall(['userId'])]);
test('userId spaces', rejects, valid({ userId: '   ' }), [tooSmall(['userId'])]);
test('no traits and no consent', rejects, valid({ traits: undefined }), [traitsRequired]);
test('traits {} and no consent', rejects, valid({ traits: {} }), [traitsRequired]);
test('traits {} and consent []', rejects, valid({ traits: {}, consent: [] }), [traitsRequired]);
test('traits only in context.traits', rejects, valid({ traits: undefined, context: { traits: { plan: 'pro' } } }), [traitsRequired]);
test('traits null', rejects, valid({ traits: null }), [wrongType(['traits'], 'object', 'null')]);
test('timestamp without time zone (readable)', rejects, valid({ timestamp: '2024-05-01T10:00:00' }), [invalidDatetime]);
test('timestamp a date alone (readable)', rejects, valid({ timestamp: '2024-05-01' }), [invalidDatetime]);
test('timestamp with a space for T (readable)', rejects, valid({ timestamp: '2024-05-01 10:00:00Z' }), [invalidDatetime]);
test('timestamp "yesterday" (unreadable)', rejects, valid({ timestamp: 'yesterday' }), [invalidDatetime, before1970]);
test('timestamp epoch ms as a string (unreadable)', rejects, valid({ timestamp: '1714557600000' }), [invalidDatetime, before1970]);
test('timestamp a number', rejects, valid({ timestamp: 1714557600000 }), [wrongType(['timestamp'], 'string', 'number')]);
test('timestamp before 1970', rejects, valid({ timestamp: '1969-12-31T23:59:59Z' }), [before1970]);
test('timestamp before 1970 through its offset', rejects, valid({ timestamp: '1970-01-01T00:30:00+01:00' }), [before1970]);
test('body an array', rejects, [valid()], [wrongType([], 'object', 'array')]);
test('body not JSON', rejects, '{"userId":"user-1",', [wrongType([], 'object', 'null')]);
test('body empty', rejects, '', [wrongType([], 'object', 'null')]);
test('body JSON null', rejects, 'null', [wrongType([], 'object', 'null')]);
test('body a {batch} envelope', rejects, { batch: [valid()] }, [required(['userId'])]);
test('context null', rejects, valid({ context: null }), [wrongType(['context'], 'object', 'null')]);
test('integrations null', rejects, valid({ integrations: null }), [wrongType(['integrations'], 'object', 'null')]);
// Field rules beyond the table (messageId: non-empty after trimming).
test('messageId spaces', rejects, valid({ messageId: '  ' }), [tooSmall(['messageId'])]);

// The consent validation table: a path of consent, index, field.
const consentIssue = (index: number, field: string, message: string) => custom(['consent', index, field], message);
const granted = { channel: 'email', status: 'granted' };

test('granted implied_transaction without consentedAt', rejects, valid({ consent: [{ ...granted, basis: 'implied_transaction' }] }), [
  consentIssue(0, 'consentedAt', M.consentedAtRequired),
]);
test('granted implied_inquiry without consentedAt', rejects, valid({ consent: [{ ...granted, basis: 'implied_inquiry' }] }), [
  consentIssue(0, 'consentedAt', M.consentedAtRequired),
]);
test('granted implied_contract without consentedAt and expiresAt', rejects, valid({ consent: [{ ...granted, basis: 'implied_contract' }] }), [
  consentIssue(0, 'consentedAt', M.consentedAtRequired),
  consentIssue(0, 'expiresAt', M.expiresAtRequired),
]);
test(
  'granted implied_contract without expiresAt (second decision)',
  rejects,
  valid({ consent: [granted, { ...granted, basis: 'implied_contract', consentedAt: T(0) }] }),
  [consentIssue(1, 'expiresAt', M.expiresAtRequired)],
);
test('tracking on sms', rejects, valid({ consent: [{ channel: 'sms', status: 'withdrawn', purpose: 'tracking' }] }), [
  consentIssue(0, 'channel', M.trackingEmailOnly),
]);
test('granted tracking with basis legitimate_interest', rejects, valid({ consent: [{ ...granted, purpose: 'tracking', basis: 'legitimate_interest' }] }), [
  consentIssue(0, 'basis', M.trackingBasis),
]);

// Every problem at once, in field order.
test('several problems at once', rejects, { userId: 42, traits: null, timestamp: 'yesterday', context: null, integrations: null }, [
  wrongType(['userId'], 'string', 'number'),
  wrongType(['traits'], 'object', 'null'),
  invalidDatetime,
  before1970,
  wrongType(['context'], 'object', 'null'),
  wrongType(['integrations'], 'object', 'null'),
]);
test('several problems at once, with the traits rule', rejects, { userId: ' ', timestamp: '2024-05-01' }, [
  tooSmall(['userId']),
  invalidDatetime,
  traitsRequired,
]);
test(
  'several consent problems at once',
  rejects,
  valid({
    userId: '',
    consent: [
      { channel: 'sms', status: 'granted', purpose: 'tracking', basis: 'implied_transaction' },
      { ...granted, basis: 'implied_contract', consentedAt: T(0) },
    ],
  }),
  [
    tooSmall(['userId']),
    consentIssue(0, 'consentedAt', M.consentedAtRequired),
    consentIssue(0, 'channel', M.trackingEmailOnly),
    consentIssue(0, 'basis', M.trackingBasis),
    consentIssue(1, 'expiresAt', M.expiresAtRequired),
  ],
);

// --- Accepted bodies around the 400 rows ---

test('consent rules: the allowed neighbours are accepted', async (t) => {
  const tenant = await newTenant(h);
  await send(
    t,
    tenant,
    valid({
      consent: [
        { channel: 'email', status: 'withdrawn', basis: 'implied_transaction' },
        { channel: 'email', status: 'granted', purpose: 'tracking' },
        { channel: 'email', status: 'granted', purpose: 'tracking', basis: 'consent' },
        { channel: 'email', status: 'withdrawn', purpose: 'tracking', basis: 'legitimate_interest' },
        { channel: 'sms', status: 'granted', basis: 'implied_contract', consentedAt: T(0), expiresAt: T(100), unknownField: 1 },
      ],
    }),
  );
});

test('timestamp 1970-01-01T00:00:00Z is accepted', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, valid({ timestamp: '1970-01-01T00:00:00Z' }));
  t.is((await readProfile(t, tenant, 'user-1')).updated_at, 0);
});

test('timestamp more than 5 minutes ahead -> 400 with its own error, nothing saved', async (t) => {
  const tenant = await newTenant(h);
  const reply = await post(tenant, valid({ timestamp: iso(Date.now() + 6 * MINUTE) }));
  t.is(reply.status, 400, reply.text);
  t.deepEqual(reply.json, { error: M.tooFarAhead });
  await assertNoProfile(t, tenant, 'user-1');
});

test('timestamp 4 minutes ahead is accepted', async (t) => {
  const tenant = await newTenant(h);
  const ahead = Date.now() + 4 * MINUTE;
  await send(t, tenant, valid({ timestamp: iso(ahead) }));
  t.is((await readProfile(t, tenant, 'user-1')).updated_at, ahead);
});

test('a tolerated identify payload (anonymousId, context.traits, unused fields) writes only top-level traits', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, {
    type: 'identify',
    userId: 'user-1',
    anonymousId: 'anon-1',
    traits: { plan: 'pro' },
    context: { traits: { ignored: true }, ip: '203.0.113.9' },
    integrations: { All: true },
    ...IGNORED_FIELDS,
  });
  t.deepEqual(await fieldsOf(t, tenant, 'user-1'), { plan: 'pro' });
  await assertNoProfile(t, tenant, 'anon-1');
});

test('the call type is not checked: a group call with userId and traits updates the profile', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { type: 'group', groupId: 'g-1', userId: 'user-1', traits: { company: 'Acme' } });
  t.deepEqual(await fieldsOf(t, tenant, 'user-1'), { company: 'Acme' });
});

// --- Merge rules, read back through GET /api/profiles ---

test('merge: only the traits sent are written, the others stay', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { a: 1, b: 'x' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { b: 'y', c: true } });
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { a: 1, b: 'y', c: true });
});

test('merge: null is stored as null and the key stays', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { a: 1, b: 2, n: null } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { a: null } });
  const fields = await fieldsOf(t, tenant, 'u1');
  t.deepEqual(fields, { a: null, b: 2, n: null });
  t.true(Object.hasOwn(fields, 'a'));
});

test('merge: a nested object or array replaces the whole stored value', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { prefs: { email: true, sms: false, deep: { x: 1 } }, tags: ['a', 'b', 'c'] } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { prefs: { push: true, deep: { y: 2 } }, tags: ['z'] } });
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { prefs: { push: true, deep: { y: 2 } }, tags: ['z'] });
});

test('merge: an older call skips older traits but applies its newer ones and new traits', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: { a: 'a@3' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { b: 'b@1' } });
  // T2: older than a's T3 (skipped), newer than b's T1 (applied), c is new (applied).
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { a: 'a@2', b: 'b@2', c: 'c@2' } });
  const profile = await readProfile(t, tenant, 'u1');
  t.deepEqual(profile.fields, { a: 'a@3', b: 'b@2', c: 'c@2' });
  t.is(profile.updated_at, T(3));
});

test('merge: on equal times the later arrival wins', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { a: 'first', b: 'first' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { a: 'second' } });
  // The same instant written with an offset is an equal time too.
  await send(t, tenant, { userId: 'u1', timestamp: '2024-05-01T12:01:00+02:00', traits: { b: 'third' } });
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { a: 'second', b: 'third' });
});

test('merge: 200 even when every trait is skipped as older', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { a: 1, b: 1 } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { a: 2, b: 2 } });
  const profile = await readProfile(t, tenant, 'u1');
  t.deepEqual(profile.fields, { a: 1, b: 1 });
  t.is(profile.updated_at, T(2));
});

test('updated_at is the latest timestamp applied and never moves back', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { a: 1 } });
  t.is((await readProfile(t, tenant, 'u1')).updated_at, T(2));
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { b: 1 } });
  const afterOlder = await readProfile(t, tenant, 'u1');
  t.is(afterOlder.updated_at, T(2));
  t.deepEqual(afterOlder.fields, { a: 1, b: 1 });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3) + 123), traits: { a: 2 } });
  t.is((await readProfile(t, tenant, 'u1')).updated_at, T(3) + 123);
});

test('timestamp with an offset and without seconds: updated_at is that instant', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: '2024-05-01T12:30+0200', traits: { a: 1 } });
  t.is((await readProfile(t, tenant, 'u1')).updated_at, Date.UTC(2024, 4, 1, 10, 30));
});

test('a call without timestamp uses the receipt time (for updated_at and the trait times)', async (t) => {
  const tenant = await newTenant(h);
  const before = Date.now();
  await send(t, tenant, { userId: 'u1', traits: { a: 'receipt' } });
  const after = Date.now();
  const profile = await readProfile(t, tenant, 'u1');
  t.true(profile.updated_at >= before && profile.updated_at <= after, `updated_at ${profile.updated_at} not in [${before}, ${after}]`);
  // A call a minute before the receipt time is older for that trait.
  await send(t, tenant, { userId: 'u1', timestamp: iso(before - MINUTE), traits: { a: 'older' } });
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { a: 'receipt' });
  // A call a minute after it is newer.
  await send(t, tenant, { userId: 'u1', timestamp: iso(after + MINUTE), traits: { a: 'newer' } });
  const latest = await readProfile(t, tenant, 'u1');
  t.deepEqual(latest.fields, { a: 'newer' });
  t.is(latest.updated_at, after + MINUTE);
});

test('userId is trimmed: "  u1 " and "u1" are one profile', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: '  u1 ', timestamp: iso(T(0)), traits: { a: 1 } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { b: 2 } });
  await send(t, tenant, { userId: '\tu1\n', timestamp: iso(T(2)), traits: { c: 3 } });
  const trimmed = await readProfile(t, tenant, 'u1');
  t.deepEqual(trimmed.fields, { a: 1, b: 2, c: 3 });
  t.is((await readProfile(t, tenant, '  u1 ')).profile_id, trimmed.profile_id);
  t.is(await h.db.profileUser.count({ where: { environmentId: tenant.environmentId } }), 1);
});

test('concurrent calls for a new userId make one profile holding every trait', async (t) => {
  const tenant = await newTenant(h);
  const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => post(tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { [`k${i}`]: i } })));
  for (const reply of replies) t.is(reply.status, 200, reply.text);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, i])));
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), 1);
});

// --- Idempotency by messageId ---

test('a new messageId: 200, duplicate false, echoed', async (t) => {
  const tenant = await newTenant(h);
  const reply = await post(tenant, valid({ messageId: 'msg-1' }));
  t.is(reply.status, 200, reply.text);
  t.deepEqual(reply.json, { success: true, messageId: 'msg-1', duplicate: false });
});

test('same messageId, userId, timestamp and traits: duplicate true, nothing applied again', async (t) => {
  const tenant = await newTenant(h);
  const first = { userId: 'u1', messageId: 'm-a', timestamp: iso(T(1)), traits: { plan: 'a' } };
  await send(t, tenant, first);
  // Another call at the same time changes the trait (equal times: the later arrival wins).
  await send(t, tenant, { userId: 'u1', messageId: 'm-b', timestamp: iso(T(1)), traits: { plan: 'b' } });
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { plan: 'b' });
  // The retry of the first call would win again if it were applied.
  await send(t, tenant, first, true);
  await send(t, tenant, first, true);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { plan: 'b' });
});

test('a retry without timestamp is a duplicate too', async (t) => {
  const tenant = await newTenant(h);
  const first = { userId: 'u1', messageId: 'm-a', traits: { plan: 'a' } };
  await send(t, tenant, first);
  await send(t, tenant, { userId: 'u1', messageId: 'm-b', traits: { plan: 'b' } });
  await send(t, tenant, first, true);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { plan: 'b' });
});

test('traits with the keys in another order are the same traits (duplicate)', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', messageId: 'm-a', timestamp: iso(T(1)), traits: { a: 1, b: { x: 1, y: [1, 2] } } });
  await send(t, tenant, { userId: 'u1', messageId: 'm-a', timestamp: iso(T(1)), traits: { b: { y: [1, 2], x: 1 }, a: 1 } }, true);
});

test('the same call sent concurrently is applied once: one duplicate false, the others duplicate true', async (t) => {
  const tenant = await newTenant(h);
  const body = { userId: 'u1', messageId: 'm-race', timestamp: iso(T(1)), traits: { n: 1 } };
  const replies = await Promise.all(Array.from({ length: 6 }, () => post(tenant, body)));
  for (const reply of replies) t.is(reply.status, 200, reply.text);
  t.deepEqual(replies.map((r) => r.json.duplicate).sort(), [false, true, true, true, true, true]);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { n: 1 });
});

const conflicts = test.macro({
  async exec(t, change: (body: Record<string, unknown>) => Record<string, unknown>) {
    const tenant = await newTenant(h);
    const first = { userId: 'u1', messageId: 'reused-1', timestamp: iso(T(1)), traits: { plan: 'a' } };
    await send(t, tenant, first);
    const before = await readProfile(t, tenant, 'u1');
    const second = change({ ...first, traits: { ...first.traits } });
    const reply = await post(tenant, second);
    t.is(reply.status, 409, reply.text);
    t.deepEqual(reply.json, { error: 'messageId reused-1 was already used for a different call' });
    // Nothing of the second call was applied.
    t.deepEqual(await readProfile(t, tenant, 'u1'), before);
    if (second.userId !== 'u1') await assertNoProfile(t, tenant, second.userId as string);
    // The same conflict again is still a conflict (and the first call is still a duplicate).
    t.is((await post(tenant, second)).status, 409);
    await send(t, tenant, first, true);
  },
  title: (provided = '') => `same messageId, ${provided} -> 409`,
});

test('different userId', conflicts, (b) => ({ ...b, userId: 'u2' }));
test('different timestamp', conflicts, (b) => ({ ...b, timestamp: iso(T(2)) }));
test('timestamp absent in the retry', conflicts, (b) => ({ ...b, timestamp: undefined }));
test('different trait value', conflicts, (b) => ({ ...b, traits: { plan: 'b' } }));
test('an extra trait', conflicts, (b) => ({ ...b, traits: { plan: 'a', extra: 1 } }));
test('a trait of another JSON type ("1" vs 1)', conflicts, (b) => ({ ...b, traits: { plan: 'a', n: '1' } }));

test('same messageId, timestamp absent in the first call and present in the retry -> 409', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', messageId: 'reused-2', traits: { plan: 'a' } });
  const reply = await post(tenant, { userId: 'u1', messageId: 'reused-2', timestamp: iso(T(1)), traits: { plan: 'a' } });
  t.is(reply.status, 409, reply.text);
  t.deepEqual(reply.json, { error: 'messageId reused-2 was already used for a different call' });
});

test('same messageId with only the consent changed: duplicate true, the new decision dropped', async (t) => {
  const tenant = await newTenant(h);
  const first = {
    userId: 'u1',
    messageId: 'm-consent',
    timestamp: iso(T(1)),
    traits: { email: 'ann@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: T(1) }],
  };
  await send(t, tenant, first);
  t.like(await consentOf(tenant, 'email', 'ann@example.com'), { status: 'granted', decidedAt: T(1) });
  await send(t, tenant, { ...first, consent: [{ channel: 'email', status: 'withdrawn', consentedAt: T(2) }] }, true);
  await send(t, tenant, { ...first, consent: [{ channel: 'sms', status: 'granted' }], traits: { email: 'ann@example.com' } }, true);
  t.like(await consentOf(tenant, 'email', 'ann@example.com'), { status: 'granted', decidedAt: T(1) });
  t.is(await decisionCount(tenant), 1);
});

test('the same messageId in two environments does not collide', async (t) => {
  const tenant = await newTenant(h);
  const other = await nonProduction(tenant);
  const body = { userId: 'u1', messageId: 'shared-id', timestamp: iso(T(1)), traits: { plan: 'a' } };
  const otherBody = { ...body, userId: 'u2', traits: { plan: 'b' } };
  await send(t, tenant, body);
  // Another userId and traits under the same ID in the other environment: no conflict, applied.
  await send(t, other, otherBody);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { plan: 'a' });
  t.deepEqual(await fieldsOf(t, other, 'u2'), { plan: 'b' });
  // Within each environment the ID is remembered.
  await send(t, tenant, body, true);
  await send(t, other, otherBody, true);
  t.is((await post(tenant, otherBody)).status, 409);
  t.is((await post(other, body)).status, 409);
});

test('an omitted messageId: a generated UUID is returned, a new one per call', async (t) => {
  const tenant = await newTenant(h);
  const body = { userId: 'u1', timestamp: iso(T(1)), traits: { plan: 'a' } };
  const [a, b] = [await post(tenant, body), await post(tenant, body)];
  for (const reply of [a, b]) {
    t.is(reply.status, 200, reply.text);
    t.deepEqual(Object.keys(reply.json).sort(), ['duplicate', 'messageId', 'success']);
    t.is(reply.json.success, true);
    t.is(reply.json.duplicate, false);
    t.regex(reply.json.messageId, UUID_RE);
  }
  t.not(a.json.messageId, b.json.messageId);
});

// --- Consent ---

test('a consent-only call (traits {} and one decision) is valid and applies to the stored email', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'ann@example.com', plan: 'pro' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: {}, consent: [{ channel: 'email', status: 'granted' }] });
  t.like(await consentOf(tenant, 'email', 'ann@example.com'), {
    address: 'ann@example.com',
    status: 'granted',
    decidedAt: T(1),
    source: 'api',
    purpose: 'marketing',
    granted: true,
  });
  // Traits unchanged.
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { email: 'ann@example.com', plan: 'pro' });
});

test('a consent-only call without traits at all is valid too', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'ann@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), consent: [{ channel: 'email', status: 'withdrawn' }] });
  t.like(await consentOf(tenant, 'email', 'ann@example.com'), { status: 'withdrawn', decidedAt: T(1) });
});

test('a consent-only call for an unknown user creates a profile without an address and records no decision', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, {
    userId: 'new-user',
    timestamp: iso(T(1)),
    traits: {},
    consent: [
      { channel: 'email', status: 'granted' },
      { channel: 'sms', status: 'granted' },
    ],
  });
  const profile = await readProfile(t, tenant, 'new-user');
  t.deepEqual(profile.fields, {});
  t.is(profile.updated_at, T(1));
  t.is(await decisionCount(tenant), 0);
});

test('a decision applies to traits.email of the same call, trimmed and lowercased', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'old@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: '  Ann@Example.COM ' }, consent: [{ channel: 'email', status: 'granted' }] });
  t.like(await consentOf(tenant, 'email', 'ann@example.com'), { address: 'ann@example.com', status: 'granted' });
  t.is(await consentOf(tenant, 'email', 'old@example.com'), null);
  t.is(await decisionCount(tenant), 1);
});

test("the same call's email wins over the stored one, even for a consentedAt before the call", async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'stored@example.com' } });
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(2)),
    traits: { email: 'sent@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: T(1) }],
  });
  t.like(await consentOf(tenant, 'email', 'sent@example.com'), { status: 'granted', decidedAt: T(1) });
  t.is(await consentOf(tenant, 'email', 'stored@example.com'), null);
});

test("the same call's email wins even when that trait write is skipped as older", async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(5)), traits: { email: 'new@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'sent@example.com' }, consent: [{ channel: 'email', status: 'granted' }] });
  t.like(await consentOf(tenant, 'email', 'sent@example.com'), { status: 'granted', decidedAt: T(1) });
  t.is(await consentOf(tenant, 'email', 'new@example.com'), null);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { email: 'new@example.com' });
});

test('without an email in the call, the stored email as of the decision time is used', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'a@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: { email: 'b@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(4)), traits: {}, consent: [{ channel: 'email', status: 'granted', consentedAt: T(2) }] });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'granted', decidedAt: T(2) });
  t.is(await consentOf(tenant, 'email', 'b@example.com'), null);
  // A decision after T3 applies to b@.
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(5)), traits: {}, consent: [{ channel: 'email', status: 'withdrawn' }] });
  t.like(await consentOf(tenant, 'email', 'b@example.com'), { status: 'withdrawn', decidedAt: T(5) });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'granted' });
});

test('a decision older than every stored email has no address as of its time: skipped, still 200', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: { email: 'a@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(4)), traits: {}, consent: [{ channel: 'email', status: 'granted', consentedAt: T(1) }] });
  t.is(await decisionCount(tenant), 0);
});

test('the decision time is consentedAt, else the timestamp, else the receipt time', async (t) => {
  const tenant = await newTenant(h);
  const decide = (userId: string, decision: Record<string, unknown>, timestamp?: number) =>
    send(t, tenant, {
      userId,
      ...(timestamp === undefined ? {} : { timestamp: iso(timestamp) }),
      traits: { email: `${userId}@example.com` },
      consent: [{ channel: 'email', status: 'granted', ...decision }],
    });
  await decide('c1', { consentedAt: T(1) }, T(2));
  await decide('c2', {}, T(2));
  const before = Date.now();
  await decide('c3', {});
  const after = Date.now();
  t.like(await consentOf(tenant, 'email', 'c1@example.com'), { decidedAt: T(1) });
  t.like(await consentOf(tenant, 'email', 'c2@example.com'), { decidedAt: T(2) });
  const third = await consentOf(tenant, 'email', 'c3@example.com');
  t.true(third !== null && third.decidedAt >= before && third.decidedAt <= after, JSON.stringify(third));
});

test("consentedAt more than 5 minutes ahead: the call's time is used instead", async (t) => {
  const tenant = await newTenant(h);
  const now = Date.now();
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(2)),
    traits: { email: 'a@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: now + 10 * MINUTE }],
  });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { decidedAt: T(2) });
  // Without a timestamp, the receipt time.
  const before = Date.now();
  await send(t, tenant, {
    userId: 'u2',
    traits: { email: 'b@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: Date.now() + 60 * DAY }],
  });
  const after = Date.now();
  const b = await consentOf(tenant, 'email', 'b@example.com');
  t.true(b !== null && b.decidedAt >= before && b.decidedAt <= after, JSON.stringify(b));
  // 4 minutes ahead is within the tolerance: consentedAt is kept.
  const ahead = Date.now() + 4 * MINUTE;
  await send(t, tenant, {
    userId: 'u3',
    timestamp: iso(T(2)),
    traits: { email: 'c@example.com' },
    consent: [{ channel: 'email', status: 'granted', consentedAt: ahead }],
  });
  t.like(await consentOf(tenant, 'email', 'c@example.com'), { decidedAt: ahead });
});

test('the newest decision wins, whatever the arrival order', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'a@example.com' } });
  const decide = (status: string, at: number) =>
    send(t, tenant, { userId: 'u1', timestamp: iso(T(10)), traits: {}, consent: [{ channel: 'email', status, consentedAt: at }] });
  await decide('granted', T(2));
  await decide('withdrawn', T(1));
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'granted', decidedAt: T(2), granted: true });
  await decide('withdrawn', T(3));
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'withdrawn', decidedAt: T(3), granted: false });
  await decide('granted', T(4));
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'granted', decidedAt: T(4) });
});

const tie = test.macro({
  async exec(t, first: string, second: string) {
    const tenant = await newTenant(h);
    await send(t, tenant, { userId: 'u1', timestamp: iso(T(0)), traits: { email: 'a@example.com' } });
    for (const status of [first, second]) {
      await send(t, tenant, { userId: 'u1', timestamp: iso(T(10)), traits: {}, consent: [{ channel: 'email', status, consentedAt: T(1) }] });
    }
    t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'withdrawn', decidedAt: T(1) });
  },
  title: (_provided = '', first: string, second: string) => `equal times: ${first} then ${second} -> withdrawn wins`,
});

test(tie, 'granted', 'withdrawn');
test(tie, 'withdrawn', 'granted');

test('equal times within one call: withdrawn wins over granted', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(1)),
    traits: { email: 'a@example.com' },
    consent: [
      { channel: 'email', status: 'withdrawn' },
      { channel: 'email', status: 'granted' },
    ],
  });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { status: 'withdrawn', decidedAt: T(1) });
});

const unknownKeeps = test.macro({
  async exec(t, status: string) {
    const tenant = await newTenant(h);
    await send(t, tenant, {
      userId: 'u1',
      timestamp: iso(T(1)),
      traits: { email: 'a@example.com' },
      consent: [{ channel: 'email', status, basis: 'consent', proofRef: 'form-1' }],
    });
    await send(t, tenant, {
      userId: 'u1',
      timestamp: iso(T(5)),
      traits: {},
      consent: [{ channel: 'email', status: 'unknown', basis: 'contract', proofRef: 'form-2' }],
    });
    t.like(await consentOf(tenant, 'email', 'a@example.com'), { status, decidedAt: T(1), basis: 'consent', proofRef: 'form-1' });
  },
  title: (_provided = '', status: string) => `a newer unknown decision never replaces ${status}`,
});

test(unknownKeeps, 'granted');
test(unknownKeeps, 'withdrawn');

test('sms decisions go to traits.phone (trimmed), email decisions to traits.email', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(1)),
    traits: { email: 'a@example.com', phone: ' +1 555 0100 ' },
    consent: [{ channel: 'sms', status: 'granted', source: 'signup_form', proofRef: 'sms-form' }],
  });
  const rows = await h.db.consentDecision.findMany({ where: { environmentId: tenant.environmentId } });
  t.deepEqual(
    rows.map((r) => [r.channel, r.purpose, r.address, r.status, r.source, r.proofRef]),
    [['sms', 'marketing', '+1 555 0100', 'granted', 'signup_form', 'sms-form']],
  );
  t.like(await consentOf(tenant, 'sms', '+1 555 0100'), { status: 'granted', granted: true });
  t.is(await consentOf(tenant, 'email', 'a@example.com'), null);
});

test('an sms decision for a profile with an email but no phone is skipped', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'a@example.com' }, consent: [{ channel: 'sms', status: 'granted' }] });
  t.is(await decisionCount(tenant), 0);
});

test('no address known: the decision is skipped and the call still returns 200', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { name: 'Ann' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { plan: 'pro' }, consent: [{ channel: 'email', status: 'granted' }] });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: { email: '   ' }, consent: [{ channel: 'email', status: 'granted' }] });
  t.is(await decisionCount(tenant), 0);
  t.deepEqual(await fieldsOf(t, tenant, 'u1'), { name: 'Ann', plan: 'pro', email: '   ' });
});

test('marketing and tracking are decided separately for one address', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(1)),
    traits: { email: 'a@example.com' },
    consent: [
      { channel: 'email', status: 'granted' },
      { channel: 'email', status: 'withdrawn', purpose: 'tracking' },
    ],
  });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { purpose: 'marketing', status: 'granted' });
  t.like(await consentOf(tenant, 'email', 'a@example.com', 'tracking'), { purpose: 'tracking', status: 'withdrawn' });
  await send(t, tenant, {
    userId: 'u1',
    timestamp: iso(T(2)),
    traits: {},
    consent: [{ channel: 'email', status: 'granted', purpose: 'tracking', basis: 'consent' }],
  });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: {}, consent: [{ channel: 'email', status: 'withdrawn' }] });
  t.like(await consentOf(tenant, 'email', 'a@example.com'), { purpose: 'marketing', status: 'withdrawn', decidedAt: T(3) });
  t.like(await consentOf(tenant, 'email', 'a@example.com', 'tracking'), { purpose: 'tracking', status: 'granted', decidedAt: T(2) });
});

// Implied-consent expiry, read through `consent get` (expiresAt, and granted = may send now).
// Dates are on the 15th at noon UTC, so calendar months and years need no clamping.
const today = new Date();
const monthsAgo = (months: number) => Date.UTC(today.getUTCFullYear(), today.getUTCMonth() - months, 15, 12);
const monthsAfter = (ms: number, months: number) => {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + months, d.getUTCDate(), 12);
};

interface Expiry {
  basis: string;
  consentedAt: number;
  expiresAt?: number;
  expected: number | null;
  granted: boolean;
}

const expiry = test.macro({
  async exec(t, e: Expiry) {
    const tenant = await newTenant(h);
    const decision = {
      channel: 'email',
      status: 'granted',
      basis: e.basis,
      consentedAt: e.consentedAt,
      ...(e.expiresAt === undefined ? {} : { expiresAt: e.expiresAt }),
    };
    await send(t, tenant, { userId: 'u1', traits: { email: 'a@example.com' }, consent: [decision] });
    t.like(await consentOf(tenant, 'email', 'a@example.com'), {
      status: 'granted',
      basis: e.basis,
      decidedAt: e.consentedAt,
      expiresAt: e.expected,
      granted: e.granted,
    });
  },
  title: (provided = '') => `expiry: ${provided}`,
});

const recent = monthsAgo(2);
const yesterday = Date.now() - DAY;
test('implied_transaction lapses 2 years after consentedAt', expiry, {
  basis: 'implied_transaction',
  consentedAt: recent,
  expected: monthsAfter(recent, 24),
  granted: true,
});
test('implied_transaction from 3 years ago has lapsed', expiry, {
  basis: 'implied_transaction',
  consentedAt: monthsAgo(36),
  expected: monthsAfter(monthsAgo(36), 24),
  granted: false,
});
test('implied_transaction: an earlier expiresAt takes precedence', expiry, {
  basis: 'implied_transaction',
  consentedAt: recent,
  expiresAt: yesterday,
  expected: yesterday,
  granted: false,
});
test('implied_transaction: a later expiresAt does not extend it', expiry, {
  basis: 'implied_transaction',
  consentedAt: recent,
  expiresAt: monthsAfter(recent, 60),
  expected: monthsAfter(recent, 24),
  granted: true,
});
test('implied_inquiry lapses 6 months after consentedAt', expiry, {
  basis: 'implied_inquiry',
  consentedAt: recent,
  expected: monthsAfter(recent, 6),
  granted: true,
});
test('implied_inquiry from 8 months ago has lapsed', expiry, {
  basis: 'implied_inquiry',
  consentedAt: monthsAgo(8),
  expected: monthsAfter(monthsAgo(8), 6),
  granted: false,
});
test('implied_inquiry: an earlier expiresAt takes precedence', expiry, {
  basis: 'implied_inquiry',
  consentedAt: recent,
  expiresAt: monthsAfter(recent, 3),
  expected: monthsAfter(recent, 3),
  granted: true,
});
test('implied_inquiry: a later expiresAt does not extend it', expiry, {
  basis: 'implied_inquiry',
  consentedAt: monthsAgo(8),
  expiresAt: monthsAfter(monthsAgo(8), 24),
  expected: monthsAfter(monthsAgo(8), 6),
  granted: false,
});
test('implied_contract lapses at the expiresAt sent (future)', expiry, {
  basis: 'implied_contract',
  consentedAt: recent,
  expiresAt: monthsAfter(recent, 40),
  expected: monthsAfter(recent, 40),
  granted: true,
});
test('implied_contract lapses at the expiresAt sent (past)', expiry, {
  basis: 'implied_contract',
  consentedAt: monthsAgo(40),
  expiresAt: yesterday,
  expected: yesterday,
  granted: false,
});
test('basis consent has no implied expiry', expiry, { basis: 'consent', consentedAt: monthsAgo(40), expected: null, granted: true });

// --- Join by email (organization feature join-by-email) ---

test('join by email: a second userId with the same email reads back the same profile', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'ann@example.com', a: 1 } });
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(2)), traits: { email: 'ann@example.com', b: 2 } });
  const [one, two] = [await readProfile(t, tenant, 'u1'), await readProfile(t, tenant, 'u2')];
  t.is(one.profile_id, two.profile_id);
  t.deepEqual(one.fields, { email: 'ann@example.com', a: 1, b: 2 });
  t.deepEqual(two.fields, one.fields);
  t.is(one.user_id, 'u1');
  t.is(two.user_id, 'u2');
  t.is(one.updated_at, T(2));
  // Later updates through either user ID land on the one profile.
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(3)), traits: { c: 3 } });
  t.deepEqual(await fieldsOf(t, tenant, 'u2'), { email: 'ann@example.com', a: 1, b: 2, c: 3 });
});

test('join by email: a userId with a profile of its own joins when it sends the email', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(1)), traits: { b: 2, shared: 'from-u2' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { email: 'ann@example.com', a: 1, shared: 'from-u1' } });
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(3)), traits: { email: 'ann@example.com' } });
  const [one, two] = [await readProfile(t, tenant, 'u1'), await readProfile(t, tenant, 'u2')];
  t.is(one.profile_id, two.profile_id);
  // Per trait, the later-written value wins.
  t.deepEqual(one.fields, { email: 'ann@example.com', a: 1, b: 2, shared: 'from-u1' });
  t.deepEqual(two.fields, one.fields);
});

test('join by email: the email is matched case-insensitively (and trimmed)', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'Ann@Example.com' } });
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(2)), traits: { email: ' ann@EXAMPLE.COM ' } });
  t.is((await readProfile(t, tenant, 'u1')).profile_id, (await readProfile(t, tenant, 'u2')).profile_id);
});

test('join by email: two new userIds sending the same email at once end up on one profile', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  const replies = await Promise.all(
    ['u1', 'u2', 'u3', 'u4'].map((userId, i) => post(tenant, { userId, timestamp: iso(T(1)), traits: { email: 'ann@example.com', [userId]: i } })),
  );
  for (const reply of replies) t.is(reply.status, 200, reply.text);
  const profiles = await Promise.all(['u1', 'u2', 'u3', 'u4'].map((userId) => readProfile(t, tenant, userId)));
  t.is(new Set(profiles.map((p) => p.profile_id)).size, 1);
  t.deepEqual(profiles[0].fields, { email: 'ann@example.com', u1: 0, u2: 1, u3: 2, u4: 3 });
});

test('join by email: an address the other profile no longer has does not join', async (t) => {
  const tenant = await newTenant(h, 'join-by-email');
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'old@example.com' } });
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(2)), traits: { email: 'new@example.com' } });
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(3)), traits: { email: 'old@example.com' } });
  t.not((await readProfile(t, tenant, 'u1')).profile_id, (await readProfile(t, tenant, 'u2')).profile_id);
  await send(t, tenant, { userId: 'u3', timestamp: iso(T(4)), traits: { email: 'new@example.com' } });
  t.is((await readProfile(t, tenant, 'u1')).profile_id, (await readProfile(t, tenant, 'u3')).profile_id);
});

test('join by email follows the organization feature as the operator changes it', async (t) => {
  const tenant = await newTenant(h);
  await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email: 'ann@example.com' } });
  await send(t, tenant, { userId: 'u2', timestamp: iso(T(2)), traits: { email: 'ann@example.com' } });
  t.not((await readProfile(t, tenant, 'u1')).profile_id, (await readProfile(t, tenant, 'u2')).profile_id);
  await orgFeatures(h.operator, [tenant.slug, '--set', 'join-by-email']);
  await send(t, tenant, { userId: 'u3', timestamp: iso(T(3)), traits: { email: 'ann@example.com' } });
  const u3 = await readProfile(t, tenant, 'u3');
  t.true([(await readProfile(t, tenant, 'u1')).profile_id, (await readProfile(t, tenant, 'u2')).profile_id].includes(u3.profile_id));
  await orgFeatures(h.operator, [tenant.slug, '--set', '']);
  await send(t, tenant, { userId: 'u4', timestamp: iso(T(4)), traits: { email: 'ann@example.com' } });
  t.not((await readProfile(t, tenant, 'u4')).profile_id, u3.profile_id);
});

const neverJoins = test.macro({
  async exec(t, email: unknown, features?: string) {
    const tenant = await newTenant(h, features);
    await send(t, tenant, { userId: 'u1', timestamp: iso(T(1)), traits: { email, a: 1 } });
    await send(t, tenant, { userId: 'u2', timestamp: iso(T(2)), traits: { email, b: 2 } });
    const [one, two] = [await readProfile(t, tenant, 'u1'), await readProfile(t, tenant, 'u2')];
    t.not(one.profile_id, two.profile_id);
    t.deepEqual(one.fields, { email, a: 1 });
    t.deepEqual(two.fields, { email, b: 2 });
  },
  title: (provided = '', email: unknown, features?: string) =>
    `${features ? 'join by email' : 'without the feature'}: ${provided || JSON.stringify(email)} never joins`,
});

test(neverJoins, 'unknown', 'join-by-email');
test(neverJoins, 'N/A', 'join-by-email');
test(neverJoins, '', 'join-by-email');
test(neverJoins, 'not-an-address', 'join-by-email');
test(neverJoins, '  ', 'join-by-email');
test(neverJoins, 42, 'join-by-email');
test(neverJoins, null, 'join-by-email');
test('a real address', neverJoins, 'ann@example.com');
