// @intake/client: Identify, Track and Profiles of the intake ingest API, with the contract's
// retry guidance built in. Node 20's standard library only.
//
//   const intake = createClient({ baseUrl: 'http://127.0.0.1:3000', orgSlug: 'acme', apiKey: process.env.INTAKE_API_KEY! });
//   await intake.identify({ userId: 'u-1', traits: { email: 'ann@example.com' } });
//   await intake.track({ userId: 'u-1', event: 'Signed Up' });
//   const profile = await intake.getProfile('u-1');
//
// Every call sends a messageId (the caller's, or one generated once per call) and a timestamp
// (the caller's, or the time of the call), so a retry is the same request byte for byte and
// the service recognizes it: Identify answers `duplicate: true`, Track stores the event once.
import { randomUUID } from 'node:crypto';
import { IntakeApiError, IntakeConnectionError, IntakeError, isTemporaryStatus, type Issue } from './errors.ts';
import { backoffDelay, DEFAULT_RETRY, isTemporaryCode, parseRetryAfter, type RetryPolicy } from './retry.ts';
import { createTransport, type Answer, type Transport } from './transport.ts';

export { IntakeApiError, IntakeConnectionError, IntakeError, isTemporaryStatus, type Issue } from './errors.ts';
export { backoffDelay, parseRetryAfter, DEFAULT_RETRY, type RetryPolicy } from './retry.ts';

export interface ClientOptions {
  /** The gateway, e.g. `https://intake.example.com`. */
  baseUrl: string;
  /** The environment's path value: the organization slug for Production. */
  orgSlug: string;
  /** The API key (sent as `X-Api-Key`). A server secret: never use it in a browser. */
  apiKey: string;
  /** `X-Service-Environment`, for a non-production environment only. */
  environment?: string;
  /** Bound of each attempt, answer included (default 10 s); a timed-out attempt is retried. */
  timeoutMs?: number;
  /** Retry policy (default 8 attempts, backoff ceiling from 250 ms doubling up to 10 s). */
  retry?: Partial<RetryPolicy>;
  /** Keep-alive connections per host (default 10, the contract's suggested concurrency). */
  maxSockets?: number;
  /** Called before each retry: what failed and how long the client waits. */
  onRetry?: (info: RetryInfo) => void;
  /** For tests: the jitter source (default Math.random). */
  random?: () => number;
}

export interface RetryInfo {
  /** The attempt that failed (1 = the first). */
  attempt: number;
  delayMs: number;
  /** The temporary status (429, 5xx), or undefined when there was no answer. */
  status?: number;
  /** The connection error code when there was no answer (`ECONNRESET`, `TIMEOUT`…). */
  code?: string;
  operation: 'identify' | 'track' | 'getProfile';
}

export type Timestamp = string | Date;

export interface ConsentDecision {
  channel: 'email' | 'sms';
  status: 'granted' | 'withdrawn' | 'unknown';
  purpose?: 'marketing' | 'tracking';
  basis?: 'consent' | 'legitimate_interest' | 'contract' | 'implied_transaction' | 'implied_contract' | 'implied_inquiry';
  source?: 'import' | 'signup_form' | 'api' | 'manual';
  consentedAt?: number;
  proofRef?: string;
  expiresAt?: number;
}

export interface IdentifyInput {
  userId: string;
  traits?: Record<string, unknown>;
  consent?: ConsentDecision[];
  /** Default: a UUID generated once for this call and kept across its retries. */
  messageId?: string;
  /** Default: the time of the call. */
  timestamp?: Timestamp;
  context?: Record<string, unknown>;
  integrations?: Record<string, unknown>;
}

export interface TrackInput {
  event: string;
  userId?: string | null;
  anonymousId?: string | null;
  properties?: Record<string, unknown>;
  /** Default: a UUID generated once for this call and kept across its retries. */
  messageId?: string;
  /** When the action happened. Default: the time of the call. */
  timestamp?: Timestamp;
  context?: Record<string, unknown>;
  integrations?: Record<string, unknown>;
}

export interface IdentifyResult {
  messageId: string;
  /** true when the service had already applied this messageId with the same userId, timestamp and traits. */
  duplicate: boolean;
  attempts: number;
}

export interface TrackResult {
  messageId: string;
  attempts: number;
}

export interface Profile {
  org_slug: string;
  user_id: string;
  profile_id: string;
  updated_at: number;
  fields: Record<string, unknown>;
}

export interface IntakeClient {
  identify(input: IdentifyInput): Promise<IdentifyResult>;
  track(input: TrackInput): Promise<TrackResult>;
  /** The profile, or null when the service has none for this user ID (a new one may take a moment to appear). */
  getProfile(userId: string): Promise<Profile | null>;
  /** Closes the kept-alive connections. */
  close(): void;
}

export function createClient(options: ClientOptions): IntakeClient {
  const policy: RetryPolicy = { ...DEFAULT_RETRY, ...options.retry };
  const timeoutMs = options.timeoutMs ?? 10_000;
  const random = options.random ?? Math.random;
  const transport = createTransport(options.maxSockets ?? 10);
  const base = options.baseUrl.replace(/\/+$/, '');
  const slug = encodeURIComponent(options.orgSlug);
  const headers: Record<string, string> = { 'x-api-key': options.apiKey, accept: 'application/json' };
  if (options.environment !== undefined) headers['x-service-environment'] = options.environment;

  const call = (operation: RetryInfo['operation'], method: string, path: string, body?: unknown) =>
    withRetries(transport, policy, random, options.onRetry, operation, {
      method,
      url: new URL(base + path),
      // Serialized once: every retry sends the same bytes.
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
      timeoutMs,
    });

  return {
    async identify(input) {
      const messageId = input.messageId ?? randomUUID();
      const body = { ...input, messageId, timestamp: timestampOf(input.timestamp) };
      const { answer, attempts } = await call('identify', 'POST', `/api/identify/${slug}`, body);
      const json = answer.json as { messageId: string; duplicate: boolean };
      return { messageId: json.messageId, duplicate: json.duplicate, attempts };
    },
    async track(input) {
      const messageId = input.messageId ?? randomUUID();
      const body = { ...input, type: 'track', messageId, timestamp: timestampOf(input.timestamp) };
      const { attempts } = await call('track', 'POST', `/api/track/${slug}`, body);
      return { messageId, attempts };
    },
    async getProfile(userId) {
      try {
        const { answer } = await call('getProfile', 'GET', `/api/profiles/${slug}/${encodeURIComponent(userId)}`);
        return answer.json as Profile;
      } catch (err) {
        if (err instanceof IntakeApiError && err.status === 404 && err.error === 'Profile not found') return null;
        throw err;
      }
    },
    close: () => transport.close(),
  };
}

function timestampOf(value: Timestamp | undefined): string {
  if (value === undefined) return new Date().toISOString();
  return value instanceof Date ? value.toISOString() : value;
}

interface Prepared {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body: string | undefined;
  timeoutMs: number;
}

type Parsed = Answer & { json: unknown };

/** Sends until a success, a permanent error, or the last attempt: only what the contract calls temporary is sent again. */
async function withRetries(
  transport: Transport,
  policy: RetryPolicy,
  random: () => number,
  onRetry: ClientOptions['onRetry'],
  operation: RetryInfo['operation'],
  req: Prepared,
): Promise<{ answer: Parsed; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    let answer: Parsed | undefined;
    let failure: (Error & { code?: string }) | undefined;
    try {
      answer = parse(await transport.send(req.method, req.url, req.headers, req.body, req.timeoutMs));
    } catch (err) {
      failure = err as Error & { code?: string };
    }
    if (answer && answer.status >= 200 && answer.status < 300) return { answer, attempts: attempt };
    const temporary = answer ? isTemporaryStatus(answer.status) : isTemporaryCode(failure?.code);
    if (!temporary || attempt >= policy.maxAttempts) throw toError(answer, failure, attempt);
    const retryAfter = answer?.status === 429 ? parseRetryAfter(header(answer, 'retry-after')) : undefined;
    const delayMs = backoffDelay(policy, attempt, random, retryAfter);
    onRetry?.({ attempt, delayMs, status: answer?.status, code: answer ? undefined : failure?.code, operation });
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
}

function parse(answer: Answer): Parsed {
  let json: unknown;
  if (/^application\/json\b/i.test(header(answer, 'content-type') ?? '')) {
    try {
      json = JSON.parse(answer.text);
    } catch {
      json = undefined;
    }
  }
  return { ...answer, json };
}

function header(answer: Answer, name: string): string | undefined {
  const value = answer.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function toError(answer: Parsed | undefined, failure: (Error & { code?: string }) | undefined, attempts: number): IntakeError {
  if (answer) {
    const body = answer.json as { error?: unknown; issues?: Issue[] } | undefined;
    const error = typeof body?.error === 'string' ? body.error : answer.text || `HTTP ${answer.status}`;
    return new IntakeApiError(answer.status, error, Array.isArray(body?.issues) ? body.issues : undefined, answer.json ?? answer.text, attempts);
  }
  const code = failure?.code ?? 'UNKNOWN';
  return new IntakeConnectionError(`${failure?.message ?? 'request failed'} (after ${attempts} attempt${attempts === 1 ? '' : 's'})`, code, attempts, {
    cause: failure,
  });
}
