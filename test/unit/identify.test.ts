import test from 'ava';
import fc from 'fast-check';
import { checkIdentify, IDENTIFY_MESSAGES, invalidEnumMessage, issuesOf as yupIssuesOf, notJsonIssues, passesEveryCheck } from '../../identify/validation.ts';
import { identifyLike } from '../fuzz/arbitraries.ts';
import type { IdentifyCheck, IdentifyInput } from '../../identify/validation.ts';
import { callDigest } from '../../identify/call-digest.ts';
import { isWithin, parsePath } from '../../platform/validation/issues.ts';
import type { Issue } from '../../platform/validation/issues.ts';

const NOW = Date.UTC(2024, 5, 1, 12, 0, 0);
const FIVE_MINUTES = 5 * 60_000;

const M = IDENTIFY_MESSAGES;
const TRAITS_ISSUE: [Path, string] = [['traits'], M.traitsRequired];

type Path = (string | number)[];

const valid = () => ({ userId: 'user-1', traits: { plan: 'pro' } });

// Overrides of the valid body; `undefined` removes the field.
function body(overrides: Record<string, unknown>): Record<string, unknown> {
  const b: Record<string, unknown> = { ...valid(), ...overrides };
  for (const k of Object.keys(b)) if (b[k] === undefined) delete b[k];
  return b;
}

// A body with one consent decision (traits kept, so only consent issues show).
function decision(d: Record<string, unknown>): Record<string, unknown> {
  return body({ consent: [d] });
}

function issuesOf(result: IdentifyCheck): Issue[] | null {
  return !result.ok && 'issues' in result ? result.issues : null;
}

function inputOf(result: IdentifyCheck): IdentifyInput | null {
  return result.ok ? result.input : null;
}

// Exact list of [path, message], in order.
const failsWith = test.macro({
  exec(t, input: unknown, expected: [Path, string][]) {
    const issues = issuesOf(checkIdentify(input, NOW));
    t.deepEqual(
      issues?.map((i) => [i.path, i.message]),
      expected,
    );
  },
  title: (provided = '', _input: unknown, expected: [Path, string][]) => `${provided} -> ${expected.map(([p, m]) => `[${p.join(',')}] ${m}`).join(' ; ')}`,
});

// Exact issue objects.
const issuesAre = test.macro({
  exec(t, input: unknown, expected: Issue[]) {
    t.deepEqual(issuesOf(checkIdentify(input, NOW)), expected);
  },
  title: (provided = '') => `issue objects: ${provided}`,
});

const passes = test.macro({
  exec(t, input: unknown) {
    const result = checkIdentify(input, NOW);
    t.true(result.ok, JSON.stringify(result));
  },
  title: (provided = '') => `accepted: ${provided}`,
});

test('the messages are the exact wording', (t) => {
  t.is(M.invalidCall, 'Invalid Identify call');
  t.is(M.tooFarAhead, 'timestamp cannot be more than 5 minutes in the future');
  t.is(M.required, 'Required');
  t.is(M.emptyString, 'String must contain at least 1 character(s)');
  t.is(M.invalidDatetime, 'Invalid datetime');
  t.is(M.before1970, 'Timestamp must be on or after 1970-01-01T00:00:00Z');
  t.is(M.traitsRequired, 'At least one trait is required unless consent is provided');
  t.is(M.consentedAtRequired, 'consentedAt is required for a granted implied-consent basis');
  t.is(M.expiresAtRequired, 'expiresAt is required for a granted implied_contract decision (termination + CASL window)');
  t.is(M.trackingEmailOnly, 'tracking consent applies to the email channel only');
  t.is(M.trackingBasis, "a tracking grant needs basis 'consent'");
  t.is(M.expectedInteger, 'Expected integer, received float');
  t.is(M.notWellFormed, 'String must be well-formed Unicode (no unpaired surrogate)');
  t.is(M.expectedString.null, 'Expected string, received null');
  t.is(M.expectedObject.array, 'Expected object, received array');
  t.is(M.expectedArray.object, 'Expected array, received object');
  t.is(M.expectedNumber.string, 'Expected number, received string');
  t.is(M.expectedChannel.number, "Expected 'email' | 'sms', received number");
  t.is(invalidEnumMessage(['email', 'sms'], 'fax'), "Invalid enum value. Expected 'email' | 'sms', received 'fax'");
});

// ---- the spec's "Identify 400 issues" table, one line per row --------------

test('userId missing', failsWith, body({ userId: undefined }), [[['userId'], 'Required']]);
test('userId null', failsWith, body({ userId: null }), [[['userId'], 'Expected string, received null']]);
test('userId number', failsWith, body({ userId: 42 }), [[['userId'], 'Expected string, received number']]);
test('userId empty', failsWith, body({ userId: '' }), [[['userId'], M.emptyString]]);
test('userId spaces', failsWith, body({ userId: ' \t ' }), [[['userId'], M.emptyString]]);
test('no traits and no consent', failsWith, body({ traits: undefined }), [TRAITS_ISSUE]);
test('traits only in context.traits', failsWith, body({ traits: undefined, context: { traits: { plan: 'pro' } } }), [TRAITS_ISSUE]);
test('traits null', failsWith, body({ traits: null }), [[['traits'], 'Expected object, received null']]);
test('timestamp bad format, readable', failsWith, body({ timestamp: '2024-01-01' }), [[['timestamp'], M.invalidDatetime]]);
test('timestamp bad format, unreadable', failsWith, body({ timestamp: '2024-13-45T00:00:00Z' }), [
  [['timestamp'], M.invalidDatetime],
  [['timestamp'], M.before1970],
]);
test('timestamp number', failsWith, body({ timestamp: 1704067200000 }), [[['timestamp'], 'Expected string, received number']]);
test('timestamp before 1970', failsWith, body({ timestamp: '1969-12-31T23:59:59Z' }), [[['timestamp'], M.before1970]]);
test('body array', failsWith, [valid()], [[[], 'Expected object, received array']]);
test('body not valid JSON', (t) => {
  t.deepEqual(notJsonIssues(), [{ code: 'invalid_type', expected: 'object', received: 'null', path: [], message: 'Expected object, received null' }]);
  // The same issues as a JSON null body.
  t.deepEqual(issuesOf(checkIdentify(null, NOW)), notJsonIssues());
});
test('consent rule broken', failsWith, decision({ channel: 'email', status: 'granted', basis: 'implied_transaction' }), [
  [['consent', 0, 'consentedAt'], M.consentedAtRequired],
]);
test('batch envelope', failsWith, { batch: [valid()] }, [[['userId'], 'Required']]);

// ---- body shape -------------------------------------------------------------

test('body string', failsWith, '{"userId":"u"}', [[[], 'Expected object, received string']]);
test('body number', failsWith, 1, [[[], 'Expected object, received number']]);
test('body boolean', failsWith, true, [[[], 'Expected object, received boolean']]);
test('body undefined', failsWith, undefined, [[[], 'Required']]);
test(
  'body array: one issue only',
  issuesAre,
  [],
  [{ code: 'invalid_type', expected: 'object', received: 'array', path: [], message: 'Expected object, received array' }],
);

// ---- issue objects ----------------------------------------------------------

test('userId missing', issuesAre, body({ userId: undefined }), [
  { code: 'invalid_type', expected: 'string', received: 'undefined', path: ['userId'], message: 'Required' },
]);
test('userId boolean', issuesAre, body({ userId: true }), [
  { code: 'invalid_type', expected: 'string', received: 'boolean', path: ['userId'], message: 'Expected string, received boolean' },
]);
test('userId spaces', issuesAre, body({ userId: '   ' }), [
  { code: 'too_small', minimum: 1, type: 'string', inclusive: true, exact: false, path: ['userId'], message: M.emptyString },
]);
test('traits array', issuesAre, body({ traits: [] }), [
  { code: 'invalid_type', expected: 'object', received: 'array', path: ['traits'], message: 'Expected object, received array' },
]);
test('timestamp unreadable', issuesAre, body({ timestamp: 'yesterday' }), [
  { code: 'invalid_string', validation: 'datetime', path: ['timestamp'], message: M.invalidDatetime },
  { code: 'custom', path: ['timestamp'], message: M.before1970 },
]);
test('no traits', issuesAre, body({ traits: {} }), [{ code: 'custom', path: ['traits'], message: M.traitsRequired }]);
test('consent enum value', issuesAre, decision({ channel: 'fax', status: 'granted' }), [
  {
    code: 'invalid_enum_value',
    options: ['email', 'sms'],
    received: 'fax',
    path: ['consent', 0, 'channel'],
    message: "Invalid enum value. Expected 'email' | 'sms', received 'fax'",
  },
]);
test('consent enum missing', issuesAre, decision({ channel: 'email' }), [
  {
    code: 'invalid_type',
    expected: "'granted' | 'withdrawn' | 'unknown'",
    received: 'undefined',
    path: ['consent', 0, 'status'],
    message: 'Required',
  },
]);
test('consent enum not a string', issuesAre, decision({ channel: 1, status: 'granted' }), [
  {
    code: 'invalid_type',
    expected: "'email' | 'sms'",
    received: 'number',
    path: ['consent', 0, 'channel'],
    message: "Expected 'email' | 'sms', received number",
  },
]);
test('consent float', issuesAre, decision({ channel: 'email', status: 'granted', expiresAt: 1.5 }), [
  { code: 'invalid_type', expected: 'integer', received: 'float', path: ['consent', 0, 'expiresAt'], message: M.expectedInteger },
]);
test('consent rule', issuesAre, decision({ channel: 'sms', status: 'withdrawn', purpose: 'tracking' }), [
  { code: 'custom', path: ['consent', 0, 'channel'], message: M.trackingEmailOnly },
]);

test('issues are fresh objects on every call', (t) => {
  const first = issuesOf(checkIdentify(body({ userId: undefined }), NOW));
  if (first === null) return t.fail();
  first[0].message = 'changed';
  first[0].path.push('x');
  t.deepEqual(issuesOf(checkIdentify(body({ userId: undefined }), NOW))?.[0], {
    code: 'invalid_type',
    expected: 'string',
    received: 'undefined',
    path: ['userId'],
    message: 'Required',
  });
  const notJson = notJsonIssues();
  notJson[0].message = 'changed';
  t.is(notJsonIssues()[0].message, 'Expected object, received null');
});

// ---- fields -----------------------------------------------------------------

test('userId array', failsWith, body({ userId: ['u'] }), [[['userId'], 'Expected string, received array']]);
test('userId object', failsWith, body({ userId: { id: 'u' } }), [[['userId'], 'Expected string, received object']]);
test('userId newline only', failsWith, body({ userId: '\n' }), [[['userId'], M.emptyString]]);
test('traits string', failsWith, body({ traits: 'plan=pro' }), [[['traits'], 'Expected object, received string']]);
test('traits number', failsWith, body({ traits: 1 }), [[['traits'], 'Expected object, received number']]);
test('traits empty object', failsWith, body({ traits: {} }), [TRAITS_ISSUE]);
test('messageId null', failsWith, body({ messageId: null }), [[['messageId'], 'Expected string, received null']]);
test('messageId number', failsWith, body({ messageId: 7 }), [[['messageId'], 'Expected string, received number']]);
test('messageId empty', failsWith, body({ messageId: '' }), [[['messageId'], M.emptyString]]);
test('messageId spaces', failsWith, body({ messageId: '   ' }), [[['messageId'], M.emptyString]]);
test('timestamp null', failsWith, body({ timestamp: null }), [[['timestamp'], 'Expected string, received null']]);
test('timestamp no zone (readable)', failsWith, body({ timestamp: '2024-01-15T10:30:00' }), [[['timestamp'], M.invalidDatetime]]);
test('timestamp space for T (readable)', failsWith, body({ timestamp: '2024-01-15 10:30:00Z' }), [[['timestamp'], M.invalidDatetime]]);
test('timestamp lowercase z', failsWith, body({ timestamp: '2024-01-15T10:30:00z' }), [[['timestamp'], M.invalidDatetime]]);
test('timestamp epoch string (unreadable)', failsWith, body({ timestamp: '1705314600000' }), [
  [['timestamp'], M.invalidDatetime],
  [['timestamp'], M.before1970],
]);
test('timestamp empty string (unreadable)', failsWith, body({ timestamp: '' }), [
  [['timestamp'], M.invalidDatetime],
  [['timestamp'], M.before1970],
]);
test('timestamp Feb 30 (Date.parse reads it)', failsWith, body({ timestamp: '2023-02-30T10:30:00Z' }), [[['timestamp'], M.invalidDatetime]]);
test('timestamp date alone before 1970 (readable): format and 1970 issues', failsWith, body({ timestamp: '1960-01-01' }), [
  [['timestamp'], M.invalidDatetime],
  [['timestamp'], M.before1970],
]);
test('timestamp one ms before 1970', failsWith, body({ timestamp: '1969-12-31T23:59:59.999Z' }), [[['timestamp'], M.before1970]]);
test('timestamp before 1970 by its offset', failsWith, body({ timestamp: '1970-01-01T00:30:00+01:00' }), [[['timestamp'], M.before1970]]);
test('timestamp 1970-01-01T00:00:00Z', passes, body({ timestamp: '1970-01-01T00:00:00Z' }));
for (const key of ['context', 'integrations']) {
  test(`${key} null`, failsWith, body({ [key]: null }), [[[key], 'Expected object, received null']]);
  test(`${key} array`, failsWith, body({ [key]: [] }), [[[key], 'Expected object, received array']]);
  test(`${key} string`, failsWith, body({ [key]: 'x' }), [[[key], 'Expected object, received string']]);
  test(`${key} empty object`, passes, body({ [key]: {} }));
}

// Identifiers with an unpaired UTF-16 surrogate (platform/validation/well-formed.ts): an issue at
// the field's path; free values (traits, consent's proofRef) keep any JSON string.
const NOT_WELL_FORMED = (path: Path): Issue => ({ code: 'invalid_string', path, message: M.notWellFormed });
test('userId lone high surrogate', issuesAre, body({ userId: 'u\ud800' }), [NOT_WELL_FORMED(['userId'])]);
test('userId lone low surrogate, padded', issuesAre, body({ userId: ' \udfff ' }), [NOT_WELL_FORMED(['userId'])]);
test('messageId lone surrogate', issuesAre, body({ messageId: '\udc00\ud800' }), [NOT_WELL_FORMED(['messageId'])]);
test('both identifiers, in field order with the other issues', failsWith, body({ userId: '\ud800', traits: null, messageId: 'm\udfff' }), [
  [['userId'], M.notWellFormed],
  [['traits'], 'Expected object, received null'],
  [['messageId'], M.notWellFormed],
]);
test('identifiers with surrogate pairs', passes, body({ userId: 'u😀', messageId: '\ud83d\ude00' }));
test('trait keys and values, address traits and proofRef keep a lone surrogate', passes, {
  userId: 'u',
  traits: { '\ud800': '\udfff', email: 'a\ud800@example.com', phone: '\udc00' },
  consent: [{ channel: 'email', status: 'granted', proofRef: 'form-\ud800' }],
});

// ---- consent: shape, enums, integers, strings -------------------------------

test('consent object', failsWith, body({ consent: { channel: 'email' } }), [[['consent'], 'Expected array, received object']]);
test('consent null', failsWith, body({ consent: null }), [[['consent'], 'Expected array, received null']]);
test('consent string', failsWith, body({ consent: 'email' }), [[['consent'], 'Expected array, received string']]);
test('consent element string', failsWith, body({ consent: ['email'] }), [[['consent', 0], 'Expected object, received string']]);
test('consent element null', failsWith, body({ consent: [null] }), [[['consent', 0], 'Expected object, received null']]);
test('consent element array', failsWith, body({ consent: [[]] }), [[['consent', 0], 'Expected object, received array']]);
test('consent element empty object', failsWith, body({ consent: [{}] }), [
  [['consent', 0, 'channel'], 'Required'],
  [['consent', 0, 'status'], 'Required'],
]);
test('channel bad', failsWith, decision({ channel: 'fax', status: 'granted' }), [
  [['consent', 0, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received 'fax'"],
]);
test('channel uppercase', failsWith, decision({ channel: 'EMAIL', status: 'granted' }), [
  [['consent', 0, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received 'EMAIL'"],
]);
test('channel null', failsWith, decision({ channel: null, status: 'granted' }), [[['consent', 0, 'channel'], "Expected 'email' | 'sms', received null"]]);
test('status bad', failsWith, decision({ channel: 'email', status: 'yes' }), [
  [['consent', 0, 'status'], "Invalid enum value. Expected 'granted' | 'withdrawn' | 'unknown', received 'yes'"],
]);
test('status boolean', failsWith, decision({ channel: 'email', status: true }), [
  [['consent', 0, 'status'], "Expected 'granted' | 'withdrawn' | 'unknown', received boolean"],
]);
test('purpose bad', failsWith, decision({ channel: 'email', status: 'granted', purpose: 'ads' }), [
  [['consent', 0, 'purpose'], "Invalid enum value. Expected 'marketing' | 'tracking', received 'ads'"],
]);
test('basis bad', failsWith, decision({ channel: 'email', status: 'granted', basis: 'implied' }), [
  [
    ['consent', 0, 'basis'],
    "Invalid enum value. Expected 'consent' | 'legitimate_interest' | 'contract' | 'implied_transaction' | 'implied_contract' | 'implied_inquiry', received 'implied'",
  ],
]);
test('basis null', failsWith, decision({ channel: 'email', status: 'granted', basis: null }), [
  [
    ['consent', 0, 'basis'],
    "Expected 'consent' | 'legitimate_interest' | 'contract' | 'implied_transaction' | 'implied_contract' | 'implied_inquiry', received null",
  ],
]);
test('source bad', failsWith, decision({ channel: 'email', status: 'granted', source: 'csv' }), [
  [['consent', 0, 'source'], "Invalid enum value. Expected 'import' | 'signup_form' | 'api' | 'manual', received 'csv'"],
]);
test('enum value holding ${path} is not interpolated', failsWith, decision({ channel: '${path}', status: 'granted' }), [
  [['consent', 0, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received '${path}'"],
]);
test('consentedAt string', failsWith, decision({ channel: 'email', status: 'granted', consentedAt: '1700000000000' }), [
  [['consent', 0, 'consentedAt'], 'Expected number, received string'],
]);
test('consentedAt float', failsWith, decision({ channel: 'email', status: 'granted', consentedAt: 1700000000000.5 }), [
  [['consent', 0, 'consentedAt'], M.expectedInteger],
]);
test('expiresAt null', failsWith, decision({ channel: 'email', status: 'granted', expiresAt: null }), [
  [['consent', 0, 'expiresAt'], 'Expected number, received null'],
]);
test('expiresAt float', failsWith, decision({ channel: 'email', status: 'granted', expiresAt: 0.1 }), [[['consent', 0, 'expiresAt'], M.expectedInteger]]);
test('proofRef empty', failsWith, decision({ channel: 'email', status: 'granted', proofRef: '' }), [[['consent', 0, 'proofRef'], M.emptyString]]);
test('proofRef number', failsWith, decision({ channel: 'email', status: 'granted', proofRef: 12 }), [
  [['consent', 0, 'proofRef'], 'Expected string, received number'],
]);
test(
  'decision fields in order',
  failsWith,
  decision({
    expiresAt: 'x',
    proofRef: '',
    consentedAt: 'x',
    source: 'x',
    basis: 'x',
    purpose: 'x',
    status: 'x',
    channel: 'x',
  }),
  [
    [['consent', 0, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received 'x'"],
    [['consent', 0, 'status'], "Invalid enum value. Expected 'granted' | 'withdrawn' | 'unknown', received 'x'"],
    [['consent', 0, 'purpose'], "Invalid enum value. Expected 'marketing' | 'tracking', received 'x'"],
    [
      ['consent', 0, 'basis'],
      "Invalid enum value. Expected 'consent' | 'legitimate_interest' | 'contract' | 'implied_transaction' | 'implied_contract' | 'implied_inquiry', received 'x'",
    ],
    [['consent', 0, 'source'], "Invalid enum value. Expected 'import' | 'signup_form' | 'api' | 'manual', received 'x'"],
    [['consent', 0, 'consentedAt'], 'Expected number, received string'],
    [['consent', 0, 'proofRef'], M.emptyString],
    [['consent', 0, 'expiresAt'], 'Expected number, received string'],
  ],
);
test('unknown decision fields are ignored', passes, decision({ channel: 'email', status: 'granted', note: null, extra: [] }));

// ---- consent rules ----------------------------------------------------------

for (const basis of ['implied_transaction', 'implied_inquiry']) {
  test(`granted ${basis} without consentedAt`, failsWith, decision({ channel: 'email', status: 'granted', basis }), [
    [['consent', 0, 'consentedAt'], M.consentedAtRequired],
  ]);
  test(`granted ${basis} with consentedAt`, passes, decision({ channel: 'email', status: 'granted', basis, consentedAt: 1 }));
  test(`withdrawn ${basis} without consentedAt`, passes, decision({ channel: 'email', status: 'withdrawn', basis }));
}
test(
  'granted implied_contract without consentedAt and expiresAt',
  failsWith,
  decision({
    channel: 'email',
    status: 'granted',
    basis: 'implied_contract',
  }),
  [
    [['consent', 0, 'consentedAt'], M.consentedAtRequired],
    [['consent', 0, 'expiresAt'], M.expiresAtRequired],
  ],
);
test(
  'granted implied_contract without expiresAt',
  failsWith,
  decision({
    channel: 'email',
    status: 'granted',
    basis: 'implied_contract',
    consentedAt: 1,
  }),
  [[['consent', 0, 'expiresAt'], M.expiresAtRequired]],
);
test(
  'granted implied_contract with both',
  passes,
  decision({
    channel: 'email',
    status: 'granted',
    basis: 'implied_contract',
    consentedAt: 1,
    expiresAt: 2,
  }),
);
test('unknown implied_contract needs nothing', passes, decision({ channel: 'email', status: 'unknown', basis: 'implied_contract' }));
test('granted consent basis needs no consentedAt', passes, decision({ channel: 'email', status: 'granted', basis: 'consent' }));
test('tracking on sms', failsWith, decision({ channel: 'sms', status: 'withdrawn', purpose: 'tracking' }), [[['consent', 0, 'channel'], M.trackingEmailOnly]]);
test(
  'tracking grant with basis contract',
  failsWith,
  decision({
    channel: 'email',
    status: 'granted',
    purpose: 'tracking',
    basis: 'contract',
  }),
  [[['consent', 0, 'basis'], M.trackingBasis]],
);
test('tracking grant with basis consent', passes, decision({ channel: 'email', status: 'granted', purpose: 'tracking', basis: 'consent' }));
test('tracking grant without basis', passes, decision({ channel: 'email', status: 'granted', purpose: 'tracking' }));
test('tracking withdrawal with basis contract', passes, decision({ channel: 'email', status: 'withdrawn', purpose: 'tracking', basis: 'contract' }));
test('marketing on sms', passes, decision({ channel: 'sms', status: 'granted', purpose: 'marketing', basis: 'contract' }));
test(
  'all four rules on one decision, in table order',
  failsWith,
  decision({
    channel: 'sms',
    status: 'granted',
    purpose: 'tracking',
    basis: 'implied_contract',
  }),
  [
    [['consent', 0, 'consentedAt'], M.consentedAtRequired],
    [['consent', 0, 'expiresAt'], M.expiresAtRequired],
    [['consent', 0, 'channel'], M.trackingEmailOnly],
    [['consent', 0, 'basis'], M.trackingBasis],
  ],
);
test(
  'rules follow the field issues of their decision',
  failsWith,
  decision({
    channel: 'sms',
    status: 'granted',
    purpose: 'tracking',
    proofRef: '',
  }),
  [
    [['consent', 0, 'proofRef'], M.emptyString],
    [['consent', 0, 'channel'], M.trackingEmailOnly],
  ],
);
test(
  'no rules for a decision with a bad enum',
  failsWith,
  decision({
    channel: 'fax',
    status: 'granted',
    purpose: 'tracking',
    basis: 'implied_contract',
  }),
  [[['consent', 0, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received 'fax'"]],
);
test(
  'no rules for a decision with a wrong type',
  failsWith,
  decision({
    channel: 'sms',
    status: 'granted',
    purpose: 'tracking',
    proofRef: 5,
  }),
  [[['consent', 0, 'proofRef'], 'Expected string, received number']],
);
// zod reports a float as a dirty issue (not aborting): the rules still run.
test(
  'rules still run after a float',
  failsWith,
  decision({
    channel: 'email',
    status: 'granted',
    basis: 'implied_contract',
    consentedAt: 1.5,
  }),
  [
    [['consent', 0, 'consentedAt'], M.expectedInteger],
    [['consent', 0, 'expiresAt'], M.expiresAtRequired],
  ],
);
test(
  'rules per decision, element by element',
  failsWith,
  body({
    consent: [
      { channel: 'email', status: 'granted', basis: 'implied_inquiry' },
      { channel: 'fax', status: 'granted', purpose: 'tracking' },
      { channel: 'sms', status: 'granted', purpose: 'tracking' },
      'x',
    ],
  }),
  [
    [['consent', 0, 'consentedAt'], M.consentedAtRequired],
    [['consent', 1, 'channel'], "Invalid enum value. Expected 'email' | 'sms', received 'fax'"],
    [['consent', 2, 'channel'], M.trackingEmailOnly],
    [['consent', 3], 'Expected object, received string'],
  ],
);
test(
  'consentedAt far in the future is valid',
  passes,
  decision({
    channel: 'email',
    status: 'granted',
    basis: 'implied_transaction',
    consentedAt: NOW + 365 * 86_400_000,
  }),
);

// ---- the traits rule ----------------------------------------------------------

test('userId spaces and no traits: two issues', failsWith, { userId: '  ' }, [[['userId'], M.emptyString], TRAITS_ISSUE]);
test('consent-only call with traits {}', passes, { userId: 'u', traits: {}, consent: [{ channel: 'email', status: 'granted' }] });
test('consent-only call without traits', passes, { userId: 'u', consent: [{ channel: 'sms', status: 'withdrawn' }] });
test('traits {} and consent []', failsWith, { userId: 'u', traits: {}, consent: [] }, [TRAITS_ISSUE]);
test('traits rule after a dirty issue', failsWith, { userId: 'u', messageId: ' ', timestamp: '1960-01-01T00:00:00Z' }, [
  [['messageId'], M.emptyString],
  [['timestamp'], M.before1970],
  TRAITS_ISSUE,
]);
test('no traits rule after an aborting issue', failsWith, { userId: 'u', context: null }, [[['context'], 'Expected object, received null']]);
test('no traits rule after a bad consent array', failsWith, { userId: 'u', traits: {}, consent: 'x' }, [[['consent'], 'Expected array, received string']]);
test('no traits rule after a wrong userId type', failsWith, { userId: null, traits: {}, consent: [] }, [[['userId'], 'Expected string, received null']]);
test('consent with a bad status only reports the status', failsWith, { userId: 'u', consent: [{ channel: 'email', status: 'no' }] }, [
  [['consent', 0, 'status'], "Invalid enum value. Expected 'granted' | 'withdrawn' | 'unknown', received 'no'"],
]);

// ---- issue order ----------------------------------------------------------------

test(
  'issue order: fields in key order, traits rule last',
  failsWith,
  {
    integrations: [],
    context: null,
    consent: [{ channel: 'sms', status: 'granted', purpose: 'tracking', proofRef: '' }],
    timestamp: '2024-01-01',
    messageId: '',
    userId: ' ',
  },
  [
    [['userId'], M.emptyString],
    [['messageId'], M.emptyString],
    [['timestamp'], M.invalidDatetime],
    [['consent', 0, 'proofRef'], M.emptyString],
    [['consent', 0, 'channel'], M.trackingEmailOnly],
    [['context'], 'Expected object, received null'],
    [['integrations'], 'Expected object, received array'],
  ],
);
test(
  'issue order: dirty issues then the traits rule',
  failsWith,
  {
    timestamp: '1900-01-01T00:00:00Z',
    messageId: ' ',
    userId: '',
    traits: {},
  },
  [[['userId'], M.emptyString], [['messageId'], M.emptyString], [['timestamp'], M.before1970], TRAITS_ISSUE],
);
test(
  'issue order: every field wrong',
  failsWith,
  {
    integrations: 1,
    context: 'x',
    consent: {},
    timestamp: false,
    messageId: 3,
    traits: null,
    userId: 2,
  },
  [
    [['userId'], 'Expected string, received number'],
    [['traits'], 'Expected object, received null'],
    [['messageId'], 'Expected string, received number'],
    [['timestamp'], 'Expected string, received boolean'],
    [['consent'], 'Expected array, received object'],
    [['context'], 'Expected object, received string'],
    [['integrations'], 'Expected object, received number'],
  ],
);

// ---- accepted input -------------------------------------------------------------

test('accepted input: trimmed IDs, defaults, unknown fields dropped', (t) => {
  const traits = { email: 'a@example.com', nested: { a: [1] }, gone: null };
  const result = checkIdentify(
    {
      userId: '  user-1 ',
      messageId: '\tmsg-1 ',
      traits,
      anonymousId: 'anon',
      type: 'group',
      sentAt: 'whenever',
      context: { traits: { ignored: true } },
      integrations: { All: false },
      consent: [
        { channel: 'email', status: 'granted', extra: 1 },
        {
          channel: 'sms',
          status: 'withdrawn',
          purpose: 'marketing',
          basis: 'implied_inquiry',
          source: 'import',
          consentedAt: 5,
          proofRef: ' form-1 ',
          expiresAt: 9,
        },
      ],
    },
    NOW,
  );
  t.deepEqual(result, {
    ok: true,
    input: {
      userId: 'user-1',
      traitsText: '{"email":"a@example.com","nested":{"a":[1]},"gone":null}',
      addressTraits: { email: 'a@example.com' },
      messageId: 'msg-1',
      timestamp: null,
      timestampMs: null,
      consent: [
        {
          channel: 'email',
          status: 'granted',
          purpose: 'marketing',
          basis: null,
          source: 'api',
          consentedAt: null,
          proofRef: null,
          expiresAt: null,
        },
        {
          channel: 'sms',
          status: 'withdrawn',
          purpose: 'marketing',
          basis: 'implied_inquiry',
          source: 'import',
          consentedAt: 5,
          proofRef: ' form-1 ',
          expiresAt: 9,
        },
      ],
      callDigest: callDigest('user-1', null, { email: 'a@example.com', nested: { a: [1] }, gone: null }),
    },
  });
});

test('accepted input: timestamp as sent and in ms; no consent is []', (t) => {
  const input = inputOf(checkIdentify(body({ timestamp: '2024-06-01T14:00:00.123456+02:00' }), NOW));
  t.is(input?.timestamp, '2024-06-01T14:00:00.123456+02:00');
  t.is(input?.timestampMs, Date.UTC(2024, 5, 1, 12, 0, 0, 123));
  t.deepEqual(input?.consent, []);
  t.is(input?.messageId, null);
});

test('accepted input: traits default to {} for a consent-only call', (t) => {
  const input = inputOf(checkIdentify({ userId: 'u', consent: [{ channel: 'email', status: 'unknown' }] }, NOW));
  t.is(input?.traitsText, '{}');
  t.deepEqual(input?.addressTraits, {});
  t.is(input?.consent[0].purpose, 'marketing');
  t.is(input?.consent[0].source, 'api');
});

test('accepted input: traits as JSON text; email and phone when sent, a non-string as null', (t) => {
  const input = inputOf(checkIdentify({ userId: 'u', traits: { b: [1, { c: null }], email: 'A@x.io', phone: { n: 1 } } }, NOW));
  t.is(input?.traitsText, '{"b":[1,{"c":null}],"email":"A@x.io","phone":{"n":1}}');
  t.deepEqual(input?.addressTraits, { email: 'A@x.io', phone: null });
  t.deepEqual(inputOf(checkIdentify({ userId: 'u', traits: { name: 'x' } }, NOW))?.addressTraits, {});
});

// ---- timestamp ahead of the clock ---------------------------------------------------

test('timestamp exactly 5 minutes ahead is accepted', (t) => {
  const ts = new Date(NOW + FIVE_MINUTES).toISOString();
  const input = inputOf(checkIdentify(body({ timestamp: ts }), NOW));
  t.is(input?.timestampMs, NOW + FIVE_MINUTES);
});

test('timestamp 5 minutes and 1 ms ahead is too far ahead', (t) => {
  const ts = new Date(NOW + FIVE_MINUTES + 1).toISOString();
  t.deepEqual(checkIdentify(body({ timestamp: ts }), NOW), { ok: false, tooFarAhead: true });
});

test('too far ahead only when there is no issue', (t) => {
  const ts = new Date(NOW + 3_600_000).toISOString();
  const result = checkIdentify(body({ timestamp: ts, messageId: '' }), NOW);
  t.deepEqual(
    issuesOf(result)?.map((i) => i.path),
    [['messageId']],
  );
});

test('a past timestamp is accepted', passes, body({ timestamp: '2001-09-09T01:46:40Z' }));

// ---- yup paths ------------------------------------------------------------------------

test('parsePath reads yup paths', (t) => {
  t.deepEqual(parsePath(undefined), []);
  t.deepEqual(parsePath(''), []);
  t.deepEqual(parsePath('userId'), ['userId']);
  t.deepEqual(parsePath('consent[0].consentedAt'), ['consent', 0, 'consentedAt']);
  t.deepEqual(parsePath('consent[12]'), ['consent', 12]);
  t.deepEqual(parsePath('["weird key"].x'), ['weird key', 'x']);
  t.deepEqual(parsePath('a["b.c"][3]'), ['a', 'b.c', 3]);
  t.deepEqual(parsePath('a["x"]y"]'), ['a', 'x"]y']);
  t.deepEqual(parsePath("a['q']"), ['a', 'q']);
  t.deepEqual(parsePath('a.0'), ['a', '0']);
  t.deepEqual(parsePath('a["0"]'), ['a', '0']);
});

test('isWithin matches a path and the paths under it', (t) => {
  t.true(isWithin('consent[1]', 'consent[1]'));
  t.true(isWithin('consent[1].channel', 'consent[1]'));
  t.true(isWithin('consent[1][0]', 'consent[1]'));
  t.false(isWithin('consent[10].channel', 'consent[1]'));
  t.false(isWithin('consentX', 'consent'));
  t.true(isWithin('anything', ''));
});

test('the checks run without yup accept exactly the bodies in which yup finds no issue', (t) => {
  let n = 0;
  let accepted = 0;
  fc.assert(
    fc.property(
      identifyLike(() => `m${n++}`),
      (value) => {
        if (typeof value !== 'object' || value === null || Array.isArray(value)) return;
        const body = value as Record<string, unknown>;
        const fast = passesEveryCheck(body);
        if (fast) accepted++;
        if (fast !== (yupIssuesOf(body) === null)) throw new Error(`disagree on ${JSON.stringify(body)}`);
      },
    ),
    { numRuns: 3000 },
  );
  // Both verdicts occur, or the property says little.
  t.true(accepted > 100 && accepted < 2900, `${accepted} of 3000 accepted`);
});
