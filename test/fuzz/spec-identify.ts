// What the spec says Identify answers for a parsed body, from its text alone: valid or not,
// and for an invalid body the issues its tables name (path and message) that must be among
// the `issues[]`. Messages of cases the spec does not spell out (an enum value outside the
// list) are checked by path only; cases it leaves open make the expectation `unknown`. IDs with
// an unpaired surrogate are refused by docs/decisions.md, not by the spec.
import { specTimestamp } from './spec-timestamp.ts';

export interface IssueMatcher {
  path: (string | number)[];
  message?: string;
  /** The issue's path only has to start with `path` (a consent rule names one field or another). */
  prefix?: boolean;
}

export type IdentifyExpectation = { kind: 'accepted' } | { kind: 'invalid'; mustInclude: IssueMatcher[] } | { kind: 'tooFarAhead' } | { kind: 'unknown' };

const FIVE_MINUTES = 5 * 60_000;
/** Timestamps this close to the 5-minute bound are left open (the request takes time to arrive). */
const CLOCK_MARGIN_MS = 10_000;
const M = {
  required: 'Required',
  tooSmall: 'String must contain at least 1 character(s)',
  invalidDatetime: 'Invalid datetime',
  before1970: 'Timestamp must be on or after 1970-01-01T00:00:00Z',
  traits: 'At least one trait is required unless consent is provided',
  consentedAt: 'consentedAt is required for a granted implied-consent basis',
  expiresAt: 'expiresAt is required for a granted implied_contract decision (termination + CASL window)',
  trackingEmail: 'tracking consent applies to the email channel only',
  trackingBasis: "a tracking grant needs basis 'consent'",
  notWellFormed: 'String must be well-formed Unicode (no unpaired surrogate)',
};
/** With the `u` flag a paired surrogate is one code point, so \p{Cs} matches only unpaired ones. */
const UNPAIRED_SURROGATE = /\p{Cs}/u;
const ENUMS: Record<string, string[]> = {
  channel: ['email', 'sms'],
  status: ['granted', 'withdrawn', 'unknown'],
  purpose: ['marketing', 'tracking'],
  basis: ['consent', 'legitimate_interest', 'contract', 'implied_transaction', 'implied_contract', 'implied_inquiry'],
  source: ['import', 'signup_form', 'api', 'manual'],
};
const IMPLIED = new Set(['implied_transaction', 'implied_contract', 'implied_inquiry']);

const jsonType = (v: unknown) => (v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const typeMessage = (expected: string, v: unknown) => (v === undefined ? M.required : `Expected ${expected}, received ${jsonType(v)}`);
/** "Non-empty after trimming": ASCII blanks are surely empty; other Unicode spaces are left open. */
const blank = (s: string) => (/^[ \t\n\r]*$/.test(s) ? 'yes' : s.trim() === '' ? 'maybe' : 'no');

export function specIdentify(body: unknown, now: number): IdentifyExpectation {
  if (!isObject(body)) return { kind: 'invalid', mustInclude: [{ path: [], message: typeMessage('object', body) }] };
  const issues: IssueMatcher[] = [];
  let open = false;
  let tooFarAhead = false;

  const requiredTrimmed = (name: string, v: unknown) => {
    if (typeof v !== 'string') return issues.push({ path: [name], message: typeMessage('string', v) });
    const b = blank(v);
    if (b === 'yes') issues.push({ path: [name], message: M.tooSmall });
    if (b === 'maybe') open = true;
    if (b === 'no' && UNPAIRED_SURROGATE.test(v)) issues.push({ path: [name], message: M.notWellFormed });
  };
  const optionalObject = (name: string) => {
    const v = body[name];
    if (v !== undefined && !isObject(v)) issues.push({ path: [name], message: typeMessage('object', v) });
  };

  requiredTrimmed('userId', body.userId);
  optionalObject('traits');
  if (body.messageId !== undefined) requiredTrimmed('messageId', body.messageId);
  const ts = body.timestamp;
  if (typeof ts === 'string') {
    const verdict = specTimestamp(ts);
    if (verdict === 'unknown') open = true;
    else if (!verdict.ok) issues.push({ path: ['timestamp'], message: M.invalidDatetime });
    else if (verdict.ms < 0) issues.push({ path: ['timestamp'], message: M.before1970 });
    else if (verdict.ms > now + FIVE_MINUTES + CLOCK_MARGIN_MS) tooFarAhead = true;
    else if (verdict.ms > now + FIVE_MINUTES - CLOCK_MARGIN_MS) open = true;
  } else if (ts !== undefined) issues.push({ path: ['timestamp'], message: typeMessage('string', ts) });
  optionalObject('context');
  optionalObject('integrations');

  const consent = body.consent;
  if (consent !== undefined && !Array.isArray(consent)) issues.push({ path: ['consent'], message: typeMessage('array', consent) });
  if (Array.isArray(consent)) consent.forEach((d, i) => checkDecision(d, i));

  const hasConsent = Array.isArray(consent) && consent.length > 0;
  const traits = body.traits;
  const noTraits = traits === undefined || (isObject(traits) && Object.keys(traits).length === 0);
  const refinement = !hasConsent && noTraits;

  if (open) return { kind: 'unknown' };
  // Which of two problems is answered first (issues or the future timestamp) the spec does not say.
  if ((issues.length || refinement) && tooFarAhead) return { kind: 'unknown' };
  if (issues.length) return { kind: 'invalid', mustInclude: issues };
  if (refinement) return { kind: 'invalid', mustInclude: [{ path: ['traits'], message: M.traits }] };
  return tooFarAhead ? { kind: 'tooFarAhead' } : { kind: 'accepted' };

  function checkDecision(d: unknown, i: number) {
    const at = (name?: string) => (name === undefined ? ['consent', i] : ['consent', i, name]);
    if (!isObject(d)) return issues.push({ path: at(), message: typeMessage('object', d) });
    const before = issues.length;
    for (const name of ['channel', 'status']) {
      const v = d[name];
      if (v === undefined) issues.push({ path: at(name), message: M.required });
      else if (!ENUMS[name].includes(v as string)) issues.push({ path: at(name) });
    }
    for (const name of ['purpose', 'basis', 'source']) {
      const v = d[name];
      if (v === null)
        open = true; // optional: whether null counts as absent, the spec does not say
      else if (v !== undefined && !ENUMS[name].includes(v as string)) issues.push({ path: at(name) });
    }
    for (const name of ['consentedAt', 'expiresAt']) {
      const v = d[name];
      if (v === null) open = true;
      else if (typeof v === 'number' && Number.isInteger(v) && Math.abs(v) > 8.64e15)
        open = true; // an integer, but no date
      else if (v !== undefined && !(typeof v === 'number' && Number.isInteger(v))) issues.push({ path: at(name) });
    }
    const proof = d.proofRef;
    if (proof === null) open = true;
    else if (typeof proof === 'string' && blank(proof) !== 'no') {
      if (proof === '') issues.push({ path: at('proofRef') });
      else open = true; // "Must not be empty": whether blank is empty, the spec does not say
    } else if (proof !== undefined && typeof proof !== 'string') issues.push({ path: at('proofRef') });
    if (issues.length > before) return;

    const granted = d.status === 'granted';
    const purpose = d.purpose ?? 'marketing';
    if (granted && IMPLIED.has(d.basis as string) && d.consentedAt === undefined) issues.push({ path: at('consentedAt'), message: M.consentedAt });
    if (granted && d.basis === 'implied_contract' && d.expiresAt === undefined) issues.push({ path: at('expiresAt'), message: M.expiresAt });
    if (purpose === 'tracking' && d.channel !== 'email') issues.push({ path: at(), message: M.trackingEmail, prefix: true });
    if (granted && purpose === 'tracking' && d.basis !== undefined && d.basis !== 'consent')
      issues.push({ path: at(), message: M.trackingBasis, prefix: true });
  }
}

/** Whether an issue of the reply satisfies a matcher. */
export function matches(issue: { path: unknown[]; message: string }, m: IssueMatcher): boolean {
  if (m.message !== undefined && issue.message !== m.message) return false;
  if (m.prefix ? issue.path.length < m.path.length : issue.path.length !== m.path.length) return false;
  return m.path.every((p, i) => issue.path[i] === p);
}
