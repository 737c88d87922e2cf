// Every error response the spec allows, as data: a non-2xx answer of the gateway must be
// exactly one of these (or one of the product decisions that give an error a text where the
// spec gives none: docs/decisions.md). Nothing here is imported from the service.
import type { RawReply } from './client.ts';

export type Endpoint = 'track' | 'identify' | 'profiles';

const JSON_TYPES = ['null', 'array', 'string', 'number', 'boolean', 'object'];
const typeMessages = (expected: string) => JSON_TYPES.filter((t) => t !== expected).map((t) => `Expected ${expected}, received ${t}`);

const SHARED: Record<number, string[]> = {
  400: ['Invalid org slug', 'Invalid environment'],
  401: ['Missing API key', 'Invalid API key'],
  403: ['Forbidden'],
  429: ['Too many requests'], // overload (docs/decisions.md)
};

const BY_ENDPOINT: Record<Endpoint, Record<number, string[]>> = {
  track: {
    400: [
      'Invalid JSON',
      'Invalid literal value, expected "track"',
      'Required',
      'String must contain at least 1 character(s)',
      'Invalid datetime',
      'At least one of userId or anonymousId is required',
      'Reserved event name', // docs/decisions.md
      'String must be well-formed Unicode (no unpaired surrogate)', // docs/decisions.md
      ...typeMessages('string'),
      ...typeMessages('object'),
    ],
    413: ['Track event is too large'],
  },
  identify: {
    400: ['timestamp cannot be more than 5 minutes in the future'],
    413: ['Request body is too large'], // docs/decisions.md
  },
  profiles: {
    404: ['Profile not found'],
  },
};

/** zod's issue keys by code: `code`, `path`, `message`, and the extra fields of that code. */
const ISSUE_EXTRAS: Record<string, string[]> = {
  invalid_type: ['expected', 'received'],
  too_small: ['minimum', 'type', 'inclusive', 'exact'],
  invalid_string: ['validation'],
  invalid_enum_value: ['options', 'received'],
  custom: [],
};

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why an issue is not of the spec's shape, or null. */
export function issueProblem(issue: unknown): string | null {
  if (!isPlainObject(issue)) return 'issue is not an object';
  const { code, path, message } = issue;
  if (typeof code !== 'string' || !(code in ISSUE_EXTRAS)) return `unknown issue code ${JSON.stringify(code)}`;
  if (typeof message !== 'string' || message === '') return 'issue message is not a non-empty string';
  if (!Array.isArray(path) || !path.every((p) => typeof p === 'string' || (Number.isInteger(p) && p >= 0))) return 'issue path is not strings and indexes';
  const allowed = new Set(['code', 'path', 'message', ...ISSUE_EXTRAS[code]]);
  const extra = Object.keys(issue).filter((k) => !allowed.has(k));
  if (extra.length) return `issue has keys outside the spec's shape: ${extra.join(', ')}`;
  for (const k of ['expected', 'received']) if (k in issue && typeof issue[k] !== 'string') return `issue ${k} is not a string`;
  return null;
}

/**
 * Why a non-2xx reply of `endpoint` is not one of the spec's error shapes, or null. A 500 (the
 * spec's Internal error, for a dependency outage) and a 503 count as problems: none is down here.
 */
export function errorShapeProblem(endpoint: Endpoint, reply: RawReply): string | null {
  const type = reply.headers['content-type'] ?? '';
  if (reply.status === 404 && reply.text === '404 Not Found') {
    return /^text\/plain\b/.test(type) ? null : `plain-text 404 with content-type ${type}`;
  }
  if (reply.status >= 500) return `${reply.status} ${reply.text}`;
  if (!/^application\/json\b/.test(type)) return `${reply.status} with content-type ${type}: ${reply.text}`;
  const body = reply.json;
  if (!isPlainObject(body) || typeof body.error !== 'string') return `${reply.status} body without an error string: ${reply.text}`;
  const keys = Object.keys(body).sort().join(',');
  if (endpoint === 'identify' && reply.status === 400 && body.error === 'Invalid Identify call') {
    if (keys !== 'error,issues') return `Identify 400 with keys ${keys}`;
    if (!Array.isArray(body.issues) || body.issues.length === 0) return 'Identify 400 without issues';
    for (const issue of body.issues) {
      const problem = issueProblem(issue);
      if (problem) return `${problem}: ${JSON.stringify(issue)}`;
    }
    return null;
  }
  if (keys !== 'error') return `${reply.status} with keys ${keys}: ${reply.text}`;
  const allowed = [...(SHARED[reply.status] ?? []), ...(BY_ENDPOINT[endpoint][reply.status] ?? [])];
  if (allowed.includes(body.error)) return null;
  if (endpoint === 'identify' && reply.status === 409 && /^messageId [\s\S]* was already used for a different call$/.test(body.error)) return null;
  return `${reply.status} ${JSON.stringify(body.error)} is not an error of the spec for ${endpoint}`;
}
