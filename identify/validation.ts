// Identify body validation. Reports every problem as zod v3 would have (the
// API's 400 `issues` are zod's), using a yup schema built once at module load.
// Each body field is a yup `mixed()` with one test doing zod's checks for it,
// each consent decision one test checking its fields; yup supplies the
// structure (paths, array elements, the issue order). Which issues abort and how
// the body refinement is skipped: see issues.ts. A body without issues (the common
// case) is cleared by the same tests run directly, without yup (passesEveryCheck).
// Why yup still wraps hand-written checks: it lays out the paths and the order of the issues that
// the 400s are held to byte for byte; the valid path never enters it, so dropping it would gain no
// speed and would rewrite that ordering by hand.
import { array, lazy, mixed, object, ValidationError } from 'yup';
import type { TestContext } from 'yup';
import { abortError, isAborting, issueAt, issueError, issueErrors, toIssues } from '../platform/validation/issues.ts';
import type { Issue, IssueData, IssueOptions } from '../platform/validation/issues.ts';
import { NOT_JSON, parseJsonBody, stringifyJson } from '../platform/json-text.ts';
import { isTooFarAhead, TOO_FAR_AHEAD_MESSAGE } from '../events/future-bound.ts';
import { hasId } from '../profiles/ids.ts';
import { callDigest } from './call-digest.ts';
import { parseTimestamp } from '../platform/validation/timestamp.ts';
import { JSON_TYPES, messagesFor, receivedType, type JsonType } from '../platform/validation/received-type.ts';
import { isWellFormed, NOT_WELL_FORMED_MESSAGE } from '../platform/validation/well-formed.ts';
import { CONSENT_PURPOSES } from '../profiles/person.ts';

export interface ConsentDecisionInput {
  channel: 'email' | 'sms';
  status: 'granted' | 'withdrawn' | 'unknown';
  purpose: 'marketing' | 'tracking';
  basis: string | null;
  source: 'import' | 'signup_form' | 'api' | 'manual';
  consentedAt: number | null;
  proofRef: string | null;
  expiresAt: number | null;
}

/**
 * A valid call, in a form that crosses threads at the cost of a copy (json-pool.ts): the traits
 * as JSON text, never as an object that may be millions of levels deep or keys wide.
 */
export interface IdentifyInput {
  userId: string; // trimmed
  /** The traits object as stringifyJson writes it. */
  traitsText: string;
  /** traits.email and traits.phone when sent: a string as sent, any other value null (no address). */
  addressTraits: AddressTraits;
  messageId: string | null; // trimmed, null when omitted
  timestamp: string | null; // as sent
  timestampMs: number | null;
  consent: ConsentDecisionInput[]; // defaults applied: purpose marketing, source api
  /** userId, timestamp and traits as a reused messageId's call is compared with (call-digest.ts). */
  callDigest: string;
}

export interface AddressTraits {
  email?: string | null;
  phone?: string | null;
}

export type IdentifyCheck = { ok: true; input: IdentifyInput } | { ok: false; issues: Issue[] } | { ok: false; tooFarAhead: true };

const CHANNELS = ['email', 'sms'] as const;
const STATUSES = ['granted', 'withdrawn', 'unknown'] as const;
const BASES = ['consent', 'legitimate_interest', 'contract', 'implied_transaction', 'implied_contract', 'implied_inquiry'] as const;
const SOURCES = ['import', 'signup_form', 'api', 'manual'] as const;
const IMPLIED_BASES: ReadonlySet<unknown> = new Set(['implied_transaction', 'implied_contract', 'implied_inquiry']);

// zod's util.joinValues: 'email' | 'sms'
const joinValues = (values: readonly string[]): string => values.map((v) => `'${v}'`).join(' | ');

export const IDENTIFY_MESSAGES = Object.freeze({
  // `error` texts of the 400 bodies
  invalidCall: 'Invalid Identify call',
  tooFarAhead: TOO_FAR_AHEAD_MESSAGE,
  // issue messages
  required: 'Required',
  emptyString: 'String must contain at least 1 character(s)',
  invalidDatetime: 'Invalid datetime',
  before1970: 'Timestamp must be on or after 1970-01-01T00:00:00Z',
  traitsRequired: 'At least one trait is required unless consent is provided',
  notWellFormed: NOT_WELL_FORMED_MESSAGE,
  consentedAtRequired: 'consentedAt is required for a granted implied-consent basis',
  expiresAtRequired: 'expiresAt is required for a granted implied_contract decision (termination + CASL window)',
  trackingEmailOnly: 'tracking consent applies to the email channel only',
  trackingBasis: "a tracking grant needs basis 'consent'",
  expectedInteger: 'Expected integer, received float',
  expectedString: messagesFor('string'),
  expectedObject: messagesFor('object'),
  expectedArray: messagesFor('array'),
  expectedNumber: messagesFor('number'),
  expectedChannel: messagesFor(joinValues(CHANNELS)),
  expectedStatus: messagesFor(joinValues(STATUSES)),
  expectedPurpose: messagesFor(joinValues(CONSENT_PURPOSES)),
  expectedBasis: messagesFor(joinValues(BASES)),
  expectedSource: messagesFor(joinValues(SOURCES)),
});

// zod's message for a string outside an enum (it holds caller data, so not fixed).
export const invalidEnumMessage = (options: readonly string[], received: string) =>
  `Invalid enum value. Expected ${joinValues(options)}, received '${received}'`;

const M = IDENTIFY_MESSAGES;

// ---- issue data, built once ------------------------------------------------

// invalid_type issues of one expected type, by received type.
interface TypeIssues {
  expected: string;
  byType: Readonly<Record<string, IssueData>>;
}

function typeIssues(expected: string, messages: Readonly<Record<JsonType, string>>): TypeIssues {
  const byType: Record<string, IssueData> = { undefined: Object.freeze({ code: 'invalid_type', expected, received: 'undefined', message: M.required }) };
  for (const t of JSON_TYPES) byType[t] = Object.freeze({ code: 'invalid_type', expected, received: t, message: messages[t] });
  return { expected, byType };
}

function typeIssue(types: TypeIssues, value: unknown): IssueData {
  const received = receivedType(value);
  const known = types.byType[received];
  if (known !== undefined) return known;
  // Not a JSON type (only reachable by calling checkIdentify directly).
  return { code: 'invalid_type', expected: types.expected, received, message: `Expected ${types.expected}, received ${received}` };
}

const STRING_TYPES = typeIssues('string', M.expectedString);
const OBJECT_TYPES = typeIssues('object', M.expectedObject);
const ARRAY_TYPES = typeIssues('array', M.expectedArray);
const NUMBER_TYPES = typeIssues('number', M.expectedNumber);

const custom = (message: string): IssueData => Object.freeze({ code: 'custom', message });

const TOO_SMALL_STRING: IssueData = Object.freeze({ code: 'too_small', minimum: 1, type: 'string', inclusive: true, exact: false, message: M.emptyString });
// An identifier with an unpaired surrogate (well-formed.ts): dirty, like too_small.
const NOT_WELL_FORMED: IssueData = Object.freeze({ code: 'invalid_string', message: M.notWellFormed });
const INVALID_DATETIME: IssueData = Object.freeze({ code: 'invalid_string', validation: 'datetime', message: M.invalidDatetime });
const FLOAT: IssueData = Object.freeze({ code: 'invalid_type', expected: 'integer', received: 'float', message: M.expectedInteger });
// zod's parsed type of NaN is 'nan' (not reachable from JSON).
const NAN: IssueData = Object.freeze({ code: 'invalid_type', expected: 'number', received: 'nan', message: 'Expected number, received nan' });
const BEFORE_1970 = custom(M.before1970);
const TRAITS_REQUIRED = custom(M.traitsRequired);
const CONSENTED_AT_REQUIRED = custom(M.consentedAtRequired);
const EXPIRES_AT_REQUIRED = custom(M.expiresAtRequired);
const TRACKING_EMAIL_ONLY = custom(M.trackingEmailOnly);
const TRACKING_BASIS = custom(M.trackingBasis);

// ---- field tests -----------------------------------------------------------

// A yup test function.
type Check = (value: unknown, ctx: TestContext) => boolean | ValidationError;

// The zod checks of one field. `key` is given when the field is a key of the
// tested value (a field of a consent decision): issues go to that key's path.
type FieldCheck = (value: unknown, ctx: TestContext, key?: string) => true | ValidationError;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function hasOwnKeys(o: Record<string, unknown>): boolean {
  for (const key in o) if (Object.hasOwn(o, key)) return true;
  return false;
}

// The yup path of the issue (built only for a failing field).
function keyPath(ctx: TestContext, key: string | undefined): string | undefined {
  return key === undefined ? undefined : `${ctx.path}.${key}`;
}

// An aborting issue.
function fatal(ctx: TestContext, issue: IssueData, key: string | undefined): ValidationError {
  return abortError(ctx, issue, keyPath(ctx, key));
}

// A dirty (non-aborting) issue.
function dirty(ctx: TestContext, issue: IssueData, key: string | undefined): ValidationError {
  return issueError(ctx, issue, key === undefined ? undefined : { path: keyPath(ctx, key) });
}

// An identifier (userId, messageId), zod: z.string().trim().min(1), refined as well-formed.
const checkRequiredId: FieldCheck = (value, ctx, key) => {
  if (typeof value !== 'string') return fatal(ctx, typeIssue(STRING_TYPES, value), key);
  if (!hasId(value)) return dirty(ctx, TOO_SMALL_STRING, key);
  return isWellFormed(value) || dirty(ctx, NOT_WELL_FORMED, key);
};

// zod: z.string().trim().min(1).optional(), refined as well-formed.
const checkOptionalId: FieldCheck = (value, ctx, key) => value === undefined || checkRequiredId(value, ctx, key);

// zod: z.string().min(1).optional()
const checkOptionalNonEmpty: FieldCheck = (value, ctx, key) => {
  if (value === undefined) return true;
  if (typeof value !== 'string') return fatal(ctx, typeIssue(STRING_TYPES, value), key);
  return value.length > 0 || dirty(ctx, TOO_SMALL_STRING, key);
};

// zod: z.record(z.unknown()).optional()
const checkOptionalObject: FieldCheck = (value, ctx, key) => value === undefined || isObject(value) || fatal(ctx, typeIssue(OBJECT_TYPES, value), key);

// zod: z.number().int().optional() (a float is a dirty issue in zod)
const checkOptionalInteger: FieldCheck = (value, ctx, key) => {
  if (value === undefined) return true;
  if (typeof value !== 'number') return fatal(ctx, typeIssue(NUMBER_TYPES, value), key);
  if (Number.isNaN(value)) return fatal(ctx, NAN, key);
  return Number.isInteger(value) || dirty(ctx, FLOAT, key);
};

// zod: z.string().datetime(shared format) plus the 1970 refinement. The refinement
// still runs after a format failure and reads the string with Date.parse, so it also
// fails for a string that is not readable as a date at all, or reads as before 1970.
const checkTimestamp: FieldCheck = (value, ctx, key) => {
  if (value === undefined) return true;
  if (typeof value !== 'string') return fatal(ctx, typeIssue(STRING_TYPES, value), key);
  const parsed = parseTimestamp(value);
  if (parsed.ok) return parsed.ms >= 0 || dirty(ctx, BEFORE_1970, key);
  const invalid = dirty(ctx, INVALID_DATETIME, key);
  if (Date.parse(value) >= 0) return invalid;
  return issueErrors(ctx, [invalid, dirty(ctx, BEFORE_1970, key)]);
};

// zod: z.enum(values), optional unless required.
function enumCheck(values: readonly string[], required: boolean): FieldCheck {
  const allowed: ReadonlySet<unknown> = new Set(values);
  const expected = joinValues(values);
  const types = typeIssues(expected, messagesFor(expected));
  return (value, ctx, key) => {
    if (value === undefined && !required) return true;
    if (typeof value !== 'string') return fatal(ctx, typeIssue(types, value), key);
    if (allowed.has(value)) return true;
    return fatal(ctx, { code: 'invalid_enum_value', options: [...values], received: value, message: invalidEnumMessage(values, value) }, key);
  };
}

// A body field: yup `mixed()` that lets every value (null too) reach its test.
function field(name: string, check: FieldCheck) {
  const test: Check = (value, ctx) => check(value, ctx);
  return mixed().nullable().test({ name, test });
}

// ---- consent decisions -----------------------------------------------------

// A decision's fields in issue order. Checked by plain code inside one yup test
// per decision: with a yup object() of eight fields per decision, yup's nested
// validation cost about 20 us per decision (Node 20), over 90% of the time.
const DECISION_FIELDS: readonly (readonly [string, FieldCheck])[] = [
  ['channel', enumCheck(CHANNELS, true)],
  ['status', enumCheck(STATUSES, true)],
  ['purpose', enumCheck(CONSENT_PURPOSES, false)],
  ['basis', enumCheck(BASES, false)],
  ['source', enumCheck(SOURCES, false)],
  ['consentedAt', checkOptionalInteger],
  ['proofRef', checkOptionalNonEmpty],
  ['expiresAt', checkOptionalInteger],
];

// One element of `consent`: zod's z.object(decision).superRefine(rules). The
// rules run only when no field aborted; their issues follow the field issues.
const checkDecision: Check = (value, ctx) => {
  if (!isObject(value)) return abortError(ctx, typeIssue(OBJECT_TYPES, value));
  let errors: ValidationError[] | null = null;
  let aborted = false;
  for (const [key, check] of DECISION_FIELDS) {
    const result = check(value[key], ctx, key);
    if (result === true) continue;
    if (isAborting(result)) aborted = true;
    (errors ??= []).push(result);
  }
  if (!aborted) errors = addConsentRules(value, ctx, errors);
  return errors === null || issueErrors(ctx, errors);
};

// The consent validation table of the spec.
function addConsentRules(d: Record<string, unknown>, ctx: TestContext, errors: ValidationError[] | null): ValidationError[] | null {
  const granted = d.status === 'granted';
  if (granted && d.consentedAt === undefined && IMPLIED_BASES.has(d.basis)) (errors ??= []).push(dirty(ctx, CONSENTED_AT_REQUIRED, 'consentedAt'));
  if (granted && d.basis === 'implied_contract' && d.expiresAt === undefined) (errors ??= []).push(dirty(ctx, EXPIRES_AT_REQUIRED, 'expiresAt'));
  if (d.purpose === 'tracking' && d.channel !== 'email') (errors ??= []).push(dirty(ctx, TRACKING_EMAIL_ONLY, 'channel'));
  if (d.purpose === 'tracking' && granted && d.basis !== undefined && d.basis !== 'consent') (errors ??= []).push(dirty(ctx, TRACKING_BASIS, 'basis'));
  return errors;
}

// ---- the body refinement ---------------------------------------------------

const TRAITS_RULE: IssueOptions = { path: 'traits', refines: '' };

// Traits may be absent or {} only when consent has at least one decision;
// `context.traits` is never read. zod runs this only when no issue of the body
// aborted: the issue names the body as what it refines, and toIssues drops it.
const checkTraitsRule: Check = (value, ctx) => {
  const { traits, consent } = value as Record<string, unknown>;
  const noTraits = traits === undefined || (isObject(traits) && !hasOwnKeys(traits));
  if (!noTraits || (Array.isArray(consent) && consent.length > 0)) return true;
  return issueError(ctx, TRAITS_REQUIRED, TRAITS_RULE);
};

// ---- the schema (built once) -----------------------------------------------

const NOT_AN_ARRAY: FieldCheck = (value, ctx) => value === undefined || abortError(ctx, typeIssue(ARRAY_TYPES, value));

// lazy() picks by JSON type so that array()'s own type check (with yup's
// message) never runs.
const CONSENT_ARRAY = array(mixed().nullable().test({ name: 'decision', test: checkDecision }));
const CONSENT_OTHER = field('consent', NOT_AN_ARRAY);
const CONSENT = lazy((value: unknown) => (Array.isArray(value) ? CONSENT_ARRAY : CONSENT_OTHER));

// The body's plain fields, each with its zod checks; consent sits between timestamp and
// context. Field order is the issue order (yup sorts field errors by key order).
const HEAD_FIELDS: readonly (readonly [string, FieldCheck])[] = [
  ['userId', checkRequiredId],
  ['traits', checkOptionalObject],
  ['messageId', checkOptionalId],
  ['timestamp', checkTimestamp],
];
const TAIL_FIELDS: readonly (readonly [string, FieldCheck])[] = [
  ['context', checkOptionalObject],
  ['integrations', checkOptionalObject],
];

const fieldsOf = (list: typeof HEAD_FIELDS) => Object.fromEntries(list.map(([name, check]) => [name, field(name, check)]));
const BODY = object({ ...fieldsOf(HEAD_FIELDS), consent: CONSENT, ...fieldsOf(TAIL_FIELDS) }).test({ name: 'traitsRule', test: checkTraitsRule });

// ---- the common case without yup -------------------------------------------

// yup's walk costs about as much as the rest of an Identify call's checks together. A body
// is first run through the same checks directly, with a context that gives up at the first
// issue; only a body with an issue is walked by yup, which lists every issue with its path.
const GAVE_UP = Symbol('an issue');
const PROBE = {
  path: '',
  options: {},
  createError(): never {
    throw GAVE_UP;
  },
} as unknown as TestContext;

/** Whether the body passes every check (exported for the test that holds it to yup's verdict). */
export function passesEveryCheck(body: Record<string, unknown>): boolean {
  try {
    for (const [name, check] of HEAD_FIELDS) if (check(body[name], PROBE) !== true) return false;
    const consent = body.consent;
    if (Array.isArray(consent)) {
      for (const d of consent) if (checkDecision(d, PROBE) !== true) return false;
    } else if (NOT_AN_ARRAY(consent, PROBE) !== true) return false;
    for (const [name, check] of TAIL_FIELDS) if (check(body[name], PROBE) !== true) return false;
    return checkTraitsRule(body, PROBE) === true;
  } catch (err) {
    if (err === GAVE_UP) return false;
    throw err;
  }
}

const VALIDATE_OPTIONS = Object.freeze({ abortEarly: false, strict: true, disableStackTrace: true });

// ---- entry points ----------------------------------------------------------

export function checkIdentify(body: unknown, now: number): IdentifyCheck {
  if (!isObject(body)) {
    // zod stops at the body's type.
    return { ok: false, issues: [issueAt(typeIssue(OBJECT_TYPES, body), [])] };
  }
  const issues = passesEveryCheck(body) ? null : issuesOf(body);
  if (issues) return { ok: false, issues };
  const input = toInput(body);
  if (input.timestampMs !== null && isTooFarAhead(input.timestampMs, now)) {
    return { ok: false, tooFarAhead: true };
  }
  return { ok: true, input };
}

/** Every issue of the body as yup lists them; null when it has none. */
export function issuesOf(body: Record<string, unknown>): Issue[] | null {
  try {
    BODY.validateSync(body, VALIDATE_OPTIONS);
    return null;
  } catch (err) {
    if (!ValidationError.isError(err)) throw err;
    return toIssues(err);
  }
}

// The issues of a body that is not JSON (zod saw null).
export function notJsonIssues(): Issue[] {
  return [issueAt(OBJECT_TYPES.byType.null, [])];
}

// Only called on a body that passed validation.
function toInput(body: Record<string, unknown>): IdentifyInput {
  const timestamp = body.timestamp === undefined ? null : (body.timestamp as string);
  const parsed = timestamp === null ? null : parseTimestamp(timestamp);
  const timestampMs = parsed?.ok ? parsed.ms : null;
  const consent = ((body.consent ?? []) as Record<string, unknown>[]).map(toDecision);
  const traits = body.traits === undefined ? {} : (body.traits as Record<string, unknown>);
  const userId = (body.userId as string).trim();
  return {
    userId,
    traitsText: stringifyJson(traits),
    addressTraits: addressTraitsOf(traits),
    messageId: body.messageId === undefined ? null : (body.messageId as string).trim(),
    timestamp,
    timestampMs,
    consent,
    callDigest: callDigest(userId, timestampMs, traits),
  };
}

/** traits.email and traits.phone as an Identify input carries them. */
export function addressTraitsOf(traits: Record<string, unknown>): AddressTraits {
  const addresses: AddressTraits = {};
  for (const key of ['email', 'phone'] as const) {
    if (Object.hasOwn(traits, key)) addresses[key] = typeof traits[key] === 'string' ? traits[key] : null;
  }
  return addresses;
}

// Validation let through no null: a default stands in for an absent field only.
function toDecision(d: Record<string, unknown>): ConsentDecisionInput {
  const { channel, status, purpose = 'marketing', basis = null, source = 'api', consentedAt = null, proofRef = null, expiresAt = null } = d;
  return { channel, status, purpose, basis, source, consentedAt, proofRef, expiresAt } as ConsentDecisionInput;
}

/**
 * `issues` as JSON text: a 4 MB body can hold millions of issues, too many to copy between
 * threads as objects. `first` is the first of them, for the request log.
 */
export type IdentifyDecoded =
  { kind: 'ok'; input: IdentifyInput } | { kind: 'notJson' } | { kind: 'invalid'; issues: string; first: Issue } | { kind: 'tooFarAhead' };

/** Identify's check 6: JSON, then every issue of the fields. */
export function decodeIdentify(raw: string, receivedAt: number): IdentifyDecoded {
  const body = parseJsonBody(raw);
  if (body === NOT_JSON) return { kind: 'notJson' };
  const result = checkIdentify(body, receivedAt);
  if (result.ok) return { kind: 'ok', input: result.input };
  return 'issues' in result ? { kind: 'invalid', issues: stringifyJson(result.issues), first: result.issues[0] } : { kind: 'tooFarAhead' };
}
