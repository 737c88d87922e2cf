// Every HTTP error of the specification, one named constructor per row of its tables.
// Thrown anywhere in a request; turned into a response only in middleware/respond-errors.ts.

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Record<string, unknown>,
    /** Response headers that belong to this error (Retry-After of the overload refusal). */
    readonly headers?: Readonly<Record<string, string>>,
    /** What the request log says refused the request, when more than the body's error. */
    readonly refusal?: string,
  ) {
    super(typeof body.error === 'string' ? body.error : `HTTP ${status}`);
  }
}

export type { Issue as IdentifyIssue } from '../platform/validation/issues.ts';
import type { Issue as IdentifyIssue } from '../platform/validation/issues.ts';
import type { JsonText } from '../platform/json-text.ts';
import { TOO_FAR_AHEAD_MESSAGE } from '../events/future-bound.ts';

export const MESSAGES = {
  invalidOrgSlug: 'Invalid org slug',
  invalidEnvironment: 'Invalid environment',
  missingApiKey: 'Missing API key',
  invalidApiKey: 'Invalid API key',
  forbidden: 'Forbidden',
  invalidJson: 'Invalid JSON',
  trackTooLarge: 'Track event is too large',
  eventStorageUnavailable: 'Event storage is unavailable',
  internal: 'Internal error',
  profileNotFound: 'Profile not found',
  identifyInvalid: 'Invalid Identify call',
  timestampTooFarAhead: TOO_FAR_AHEAD_MESSAGE,
  bodyTooLarge: 'Request body is too large',
  tooManyRequests: 'Too many requests',
  requestTimeout: 'Request timeout',
} as const;

/** Seconds a refused client is asked to wait (the spec's retry guidance adds backoff and jitter). */
export const OVERLOAD_RETRY_AFTER_SECONDS = 1;

/** The plain-text body of every unmatched path or method. */
export const NOT_FOUND_TEXT = '404 Not Found';

const error = (status: number, message: string) => new ApiError(status, { error: message });

export const invalidOrgSlug = () => error(400, MESSAGES.invalidOrgSlug);
export const invalidEnvironment = () => error(400, MESSAGES.invalidEnvironment);
export const missingApiKey = () => error(401, MESSAGES.missingApiKey);
export const invalidApiKey = () => error(401, MESSAGES.invalidApiKey);
export const forbidden = () => error(403, MESSAGES.forbidden);
export const trackInvalid = (message: string) => error(400, message);
export const invalidJson = () => error(400, MESSAGES.invalidJson);
export const trackTooLarge = () => error(413, MESSAGES.trackTooLarge);
export const eventStorageUnavailable = () => error(503, MESSAGES.eventStorageUnavailable);
export const internal = () => error(500, MESSAGES.internal);
export const profileNotFound = () => error(404, MESSAGES.profileNotFound);
/**
 * `issues` may come as JSON text (a body's issue list can be millions long, serialized off the
 * event loop) with its first issue beside it; the log names that one's path and message, never a value.
 */
export function identifyInvalid(issues: IdentifyIssue[] | JsonText, first = Array.isArray(issues) ? issues[0] : undefined): ApiError {
  const at = first === undefined ? '' : `: ${first.path.length > 0 ? `${first.path.join('.')}: ` : ''}${first.message}`;
  return new ApiError(400, { error: MESSAGES.identifyInvalid, issues }, undefined, `${MESSAGES.identifyInvalid}${at}`);
}
/** Identify has no size limit in the spec; this is the configurable memory guard. */
export const bodyTooLarge = () => error(413, MESSAGES.bodyTooLarge);
export const timestampTooFarAhead = () => error(400, MESSAGES.timestampTooFarAhead);
export const messageIdConflict = (id: string) => error(409, `messageId ${id} was already used for a different call`);
/** GET /metrics of a multi-process gateway (not an endpoint of the spec) when its processes' metrics could not be gathered. */
export const metricsUnavailable = (why: string) => error(503, `Metrics are unavailable: ${why}`);
/**
 * A bound of gateway/admission.ts is full (the request's environment's part, or the process's):
 * a temporary refusal the spec's retry guidance covers (429). `unreadBody`: the refusal comes
 * before the body was read, so the connection, which cannot carry another request, is closed.
 */
export const tooManyRequests = (unreadBody = false) =>
  new ApiError(
    429,
    { error: MESSAGES.tooManyRequests },
    unreadBody ? { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS), Connection: 'close' } : { 'Retry-After': String(OVERLOAD_RETRY_AFTER_SECONDS) },
  );
/**
 * The body arrived too slowly (BODY_TIMEOUT_MS, BODY_MIN_BYTES_PER_SECOND): the answer Node's
 * own request timeout gets (client-error.ts), and the connection is closed mid-body.
 */
export const requestTimeout = () => new ApiError(408, { error: MESSAGES.requestTimeout }, { Connection: 'close' });
