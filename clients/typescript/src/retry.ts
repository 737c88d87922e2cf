// The contract's retry guidance as pure functions: which failures are temporary, and how long
// to wait before the next attempt (exponential backoff with full jitter, Retry-After as a floor).

export interface RetryPolicy {
  /** Attempts per call, the first included. */
  maxAttempts: number;
  /** The first backoff ceiling; it doubles on each retry. */
  baseDelayMs: number;
  /** The largest backoff ceiling. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxAttempts: 8, baseDelayMs: 250, maxDelayMs: 10_000 };

/**
 * Errors of a request that got no answer and may be sent again: connections refused, reset or
 * cut mid-answer, unreachable networks, temporary DNS failures. (An unknown host, ENOTFOUND,
 * is a configuration mistake and fails at once.)
 */
const TEMPORARY_CODES = new Set([
  'ECONNRESET',
  'ECONNREFUSED',
  'EPIPE',
  'ETIMEDOUT',
  'ECONNABORTED',
  'EAI_AGAIN',
  'ENETUNREACH',
  'EHOSTUNREACH',
  'ENETDOWN',
  'TIMEOUT',
]);

export function isTemporaryCode(code: string | undefined): boolean {
  return code !== undefined && TEMPORARY_CODES.has(code);
}

/**
 * Full jitter (a uniformly random wait up to the exponential ceiling) spreads the retries of
 * many callers that failed together, instead of sending them back in waves. `retry` counts
 * from 1. A Retry-After of the service is a floor.
 */
export function backoffDelay(policy: RetryPolicy, retry: number, random: () => number, retryAfterMs?: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (retry - 1));
  const jittered = Math.floor(random() * ceiling);
  return retryAfterMs === undefined ? jittered : Math.max(retryAfterMs, jittered);
}

/** Retry-After in milliseconds: delay-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
