// A fetch wrapper that never throws on 4xx/5xx and returns what tests assert on.
import { conform } from './api-conformance.ts';
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: any;
}

export interface RequestOptions {
  method?: string;
  headers?: Record<string, string>;
  /** An object is sent as JSON; a string or Buffer is sent as is. */
  body?: unknown;
  timeoutMs?: number;
}

export async function request(baseUrl: string, path: string, options: RequestOptions = {}): Promise<Reply> {
  const { method = 'POST', headers = {}, body, timeoutMs = 15_000 } = options;
  let payload: string | Buffer | undefined;
  if (body === undefined) payload = undefined;
  else if (typeof body === 'string' || Buffer.isBuffer(body)) payload = body as string | Buffer;
  else payload = JSON.stringify(body);
  const res = await fetch(baseUrl + path, {
    method,
    headers: payload !== undefined && !hasHeader(headers, 'content-type') ? { 'content-type': 'application/json', ...headers } : headers,
    body: payload as unknown as RequestInit['body'],
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  // Every reply of the three endpoints must match docs/openapi.yaml (throws when it does not).
  conform({ method, path, status: res.status, header: (name) => res.headers.get(name) ?? undefined, text });
  return { status: res.status, headers: res.headers, text, json };
}

function hasHeader(headers: Record<string, string>, name: string): boolean {
  return Object.keys(headers).some((h) => h.toLowerCase() === name);
}

/** A valid Track body; override or delete fields per test. */
export function trackBody(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    type: 'track',
    messageId: `m-${Math.random().toString(36).slice(2)}-${Date.now()}`,
    event: 'Signed Up',
    userId: 'user-1',
    timestamp: '2024-05-01T10:00:00Z',
    ...overrides,
  };
}
