// Generators for the fuzz properties: near-valid bodies (every field valid, wrong, odd or
// missing), arbitrary JSON, raw strings and bytes, header values, and path segments.
import fc from 'fast-check';

/** Marks a field to leave out of the generated object. */
export const ABSENT = Symbol('absent');
type Field<T> = T | typeof ABSENT;

/** An object from optional fields: ABSENT ones are left out. */
export function objectOf(fields: Record<string, fc.Arbitrary<unknown>>, extra: fc.Arbitrary<Record<string, unknown>> = fc.constant({})) {
  return fc.tuple(fc.record(fields), extra).map(([record, more]) => {
    const out: Record<string, unknown> = { ...more };
    for (const [k, v] of Object.entries(record)) if (v !== ABSENT) out[k] = v;
    return out;
  });
}

/** Mostly `valid` (about a third of the bodies are then valid throughout), sometimes `odd`, sometimes absent. */
export function field<T>(valid: fc.Arbitrary<T>, odd: fc.Arbitrary<unknown> = anyJson): fc.Arbitrary<Field<unknown>> {
  return fc.oneof({ weight: 18, arbitrary: valid }, { weight: 1, arbitrary: odd }, { weight: 1, arbitrary: fc.constant(ABSENT) });
}

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c));
/** Any code unit sequence a JSON string can carry: ASCII, control characters, any code point, lone surrogates. */
const anyUnit = fc.oneof(
  { weight: 6, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 1, maxLength: 1 }) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'binary-ascii', minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.constantFrom('\u0000', ' ', '\t', '\n', '\u00a0', '\u2028', '\ufeff', '"', '\\', '/', '%', ':') },
  { weight: 1, arbitrary: loneSurrogate },
);
export const anyString = (constraints: { minLength?: number; maxLength?: number } = {}) => fc.string({ unit: anyUnit, maxLength: 24, ...constraints });
export const whitespace = fc.string({ unit: fc.constantFrom(' ', '\t', '\n', '\r'), minLength: 0, maxLength: 4 });
export const anyJson = fc.jsonValue({ maxDepth: 3, stringUnit: anyUnit });
export const anyObject = fc.dictionary(anyString(), anyJson, { maxKeys: 5 });

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

/** Timestamps of every form the spec accepts, for instants from `min` to `max` (any offset). */
export const timestampBetween = (min: number, max: number) =>
  fc
    .record({
      ms: fc.integer({ min, max }),
      form: fc.constantFrom('Z', 'fraction', 'colon', 'nocolon', 'noseconds'),
      fraction: fc.string({ unit: fc.constantFrom(...'0123456789'), minLength: 1, maxLength: 9 }),
      offset: fc.integer({ min: -14 * 60, max: 14 * 60 }),
    })
    .map(({ ms, form, fraction, offset: anyOffset }) => {
      const offset = form === 'colon' || form === 'nocolon' ? anyOffset : 0;
      const local = new Date(ms + offset * 60_000);
      const date = `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1)}-${pad(local.getUTCDate())}`;
      const time = `${pad(local.getUTCHours())}:${pad(local.getUTCMinutes())}`;
      const seconds = `:${pad(local.getUTCSeconds())}`;
      const zone = `${offset < 0 ? '-' : '+'}${pad(Math.floor(Math.abs(offset) / 60))}${form === 'nocolon' ? '' : ':'}${pad(Math.abs(offset) % 60)}`;
      switch (form) {
        case 'Z':
          return `${date}T${time}${seconds}Z`;
        case 'fraction':
          return `${date}T${time}${seconds}.${fraction}Z`;
        case 'noseconds':
          return `${date}T${time}Z`;
        default:
          return `${date}T${time}${seconds}${zone}`;
      }
    });

/** Any date from 0001 to 9999 (Track has no bounds). */
export const validTimestamp = timestampBetween(Date.UTC(1, 0, 1) + 86_400_000, Date.UTC(9999, 11, 30));

/** Timestamps of the forms the spec rejects, and near misses. */
export const invalidTimestamp = fc.constantFrom(
  '2024-05-01T10:00:00', // no time zone
  '2024-05-01 10:00:00Z', // space for T
  '2024-05-01T10:00:00+02', // hour-only offset
  '2024-05-01', // date alone
  '2024-05-01t10:00:00Z',
  '2024-05-01T10:00:00z',
  '2023-02-29T10:00:00Z', // nonexistent dates
  '2024-02-30T10:00:00Z',
  '2024-04-31T10:00:00Z',
  '2024-13-01T10:00:00Z',
  '2024-00-10T10:00:00Z',
  '2024-05-01T10:60:00Z',
  '2024-05-01T25:00:00Z',
  '1714557600000',
  '2024-05-01T10:00:00.Z',
  '2024-05-01T10:00:00Z\n',
  ' 2024-05-01T10:00:00Z',
  '２０２４-05-01T10:00:00Z',
  '',
);

export const timestamp = fc.oneof(
  { weight: 16, arbitrary: validTimestamp },
  { weight: 2, arbitrary: invalidTimestamp },
  { weight: 1, arbitrary: anyString() },
  { weight: 1, arbitrary: fc.integer() },
);

const ids = fc.oneof({ weight: 8, arbitrary: anyString({ minLength: 1 }) }, { weight: 1, arbitrary: whitespace }, { weight: 1, arbitrary: fc.constant(null) });
const objectField = fc.oneof(
  { weight: 16, arbitrary: anyObject },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.array(anyJson, { maxLength: 2 }) },
);
/** Top-level fields the spec says are ignored, and anything else. */
const extraFields = fc.oneof(
  fc.constant({}),
  fc.record({ sentAt: anyJson, version: anyJson, writeKey: anyJson, channel: anyJson }, { requiredKeys: [] }),
  anyObject,
);

/** Track bodies around the valid one: each field valid, mistyped, odd or missing. */
export const trackLike = objectOf(
  {
    type: field(fc.constant('track'), fc.oneof(fc.constantFrom('Track', 'identify', ' track', 'track '), anyJson)),
    messageId: field(fc.oneof({ weight: 8, arbitrary: anyString({ minLength: 1 }) }, { weight: 1, arbitrary: whitespace })),
    event: field(
      fc.oneof(
        { weight: 8, arbitrary: anyString({ minLength: 1 }) },
        { weight: 1, arbitrary: fc.constantFrom('Signed Up', 'profile_fields_changed', 'subscription_changed', '', ' ') },
      ),
    ),
    timestamp: field(timestamp),
    userId: field(ids),
    anonymousId: field(ids),
    properties: field(objectField),
    context: field(objectField),
    integrations: field(objectField),
  },
  extraFields,
);

const integerMs = fc.integer({ min: 0, max: Date.UTC(2100, 0, 1) });
const decisionNumber = fc.oneof(
  { weight: 8, arbitrary: integerMs },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.constantFrom(1e300, -1, 0, 8.64e15 + 1, 2 ** 53) },
);

/** One consent decision around the valid ones. */
export const decisionLike = objectOf(
  {
    channel: field(fc.constantFrom('email', 'sms'), fc.oneof(fc.constantFrom('Email', 'push', ''), anyJson)),
    status: field(fc.constantFrom('granted', 'withdrawn', 'unknown'), fc.oneof(fc.constantFrom('GRANTED', 'denied'), anyJson)),
    purpose: field(fc.constantFrom('marketing', 'tracking'), fc.oneof(fc.constantFrom('sales'), anyJson)),
    basis: field(fc.constantFrom('consent', 'legitimate_interest', 'contract', 'implied_transaction', 'implied_contract', 'implied_inquiry'), anyJson),
    source: field(fc.constantFrom('import', 'signup_form', 'api', 'manual'), anyJson),
    consentedAt: field(decisionNumber),
    proofRef: field(fc.oneof(anyString({ minLength: 1 }), fc.constant(''))),
    expiresAt: field(decisionNumber),
  },
  fc.oneof(fc.constant({}), fc.record({ note: anyJson })),
);

const traitValue = fc.oneof(anyJson, fc.emailAddress(), fc.constantFrom('unknown', 'N/A', 'noreply@example.com'));
const traits = fc.oneof(
  {
    weight: 16,
    arbitrary: fc.dictionary(fc.oneof(anyString(), fc.constantFrom('email', 'phone', 'name', '__proto__')), traitValue, { minKeys: 1, maxKeys: 5 }),
  },
  { weight: 1, arbitrary: fc.constant({}) },
  { weight: 1, arbitrary: fc.constant(null) },
  { weight: 1, arbitrary: fc.array(anyJson, { maxLength: 2 }) },
);

/** Identify timestamps: mostly well in the past, some far in the future, some malformed. */
const identifyTimestamp = fc.oneof(
  { weight: 16, arbitrary: timestampBetween(0, Date.now() - 60_000) },
  { weight: 1, arbitrary: validTimestamp },
  { weight: 1, arbitrary: fc.constant('1969-12-31T23:59:59Z') },
  { weight: 1, arbitrary: fc.integer({ min: 60, max: 60 * 24 * 365 }).map((minutes) => new Date(Date.now() + minutes * 60_000).toISOString()) },
  { weight: 2, arbitrary: invalidTimestamp },
  { weight: 1, arbitrary: anyString() },
  { weight: 1, arbitrary: fc.integer() },
);

/** Identify bodies around the valid one. `unique` makes most messageIds new, so few calls repeat one. */
export const identifyLike = (unique: () => string) =>
  objectOf(
    {
      userId: field(fc.oneof({ weight: 16, arbitrary: anyString({ minLength: 1 }) }, { weight: 1, arbitrary: whitespace })),
      traits: field(traits),
      messageId: fc.oneof(
        { weight: 3, arbitrary: fc.constant(ABSENT) },
        { weight: 4, arbitrary: anyString().map((s) => unique() + s) },
        { weight: 1, arbitrary: whitespace },
        { weight: 1, arbitrary: fc.constantFrom('fixed-1', 'fixed-2') },
        { weight: 1, arbitrary: anyJson },
      ),
      timestamp: field(identifyTimestamp),
      consent: fc.oneof(
        { weight: 4, arbitrary: fc.constant(ABSENT) },
        { weight: 4, arbitrary: fc.array(decisionLike, { maxLength: 2 }) },
        { weight: 1, arbitrary: anyJson },
      ),
      context: field(fc.oneof(anyObject, fc.record({ traits: anyObject })), anyJson),
      integrations: field(anyObject, anyJson),
    },
    extraFields,
  );

/** Raw bodies: text that is almost JSON, any text, any bytes. */
export const rawBody = fc.oneof(
  fc.json({ maxDepth: 3 }),
  fc.json({ maxDepth: 2 }).map((j) => j.slice(0, Math.max(0, j.length - 1))),
  fc.constantFrom(
    '',
    ' ',
    '{',
    '}',
    '[]',
    'null',
    '"x"',
    '{"type":"track"',
    '{"a":1}{"b":2}',
    '\ufeff{}',
    '{"__proto__":{"x":1}}',
    'NaN',
    '1e999',
    '{"a":1,}',
    "{'a':1}",
  ),
  anyString({ maxLength: 64 }),
  fc.uint8Array({ maxLength: 64 }).map((bytes) => Buffer.from(bytes)),
);

/** A header value Node's HTTP client will send: tab, printable ASCII and Latin-1 bytes. */
export const headerValue = fc.string({
  unit: fc
    .oneof(
      { weight: 8, arbitrary: fc.integer({ min: 0x20, max: 0x7e }) },
      { weight: 1, arbitrary: fc.integer({ min: 0x80, max: 0xff }) },
      { weight: 1, arbitrary: fc.constant(9) },
    )
    .map((c) => String.fromCharCode(c)),
  maxLength: 48,
});

/** Path characters Node's client sends (no space or control below DEL), without `?` and `#` (those end the path). */
const pathChar = fc
  .integer({ min: 0x21, max: 0xff })
  .filter((c) => c !== 0x3f && c !== 0x23)
  .map((c) => String.fromCharCode(c));
const hex = fc.constantFrom(...'0123456789abcdefABCDEF');
const percentTriple = fc.tuple(hex, hex).map(([a, b]) => `%${a}${b}`);
/** One raw path segment: literal characters, percent-escapes (well-formed UTF-8 or not), encoded text. */
export const pathSegment = fc.oneof(
  fc.string({
    unit: fc.oneof(
      { weight: 4, arbitrary: pathChar },
      { weight: 1, arbitrary: percentTriple },
      { weight: 1, arbitrary: fc.constantFrom('%', '%2F', '%2f', '%00', '%20', '/', '.', '..', '%25') },
    ),
    maxLength: 20,
  }),
  fc.string({ unit: 'grapheme', maxLength: 12 }).map(encodeURIComponent),
  fc.string({ unit: 'binary-ascii', maxLength: 12 }).map(encodeURIComponent),
);
