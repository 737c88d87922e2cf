// A fetch wrapper that never throws on 4xx/5xx and returns what tests assert on.
import http from 'node:http';
import net from 'node:net';
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

/**
 * POST one Track body through node:http with a keep-alive agent rather than fetch: cheap enough
 * that the gateway, not the test process, is the bottleneck of a load test. `ms`: its latency.
 */
export function postTrack(agent: http.Agent, url: string, tenant: { slug: string; key: string }, body: Record<string, unknown>) {
  return new Promise<{ status: number; text: string; ms: number }>((resolve, reject) => {
    const started = performance.now();
    const payload = JSON.stringify(body);
    const req = http.request(
      {
        agent,
        host: '127.0.0.1',
        port: new URL(url).port,
        method: 'POST',
        path: `/api/track/${tenant.slug}`,
        headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: 20_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text, ms: performance.now() - started }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(payload);
  });
}

/** Track (`body` over trackBody's defaults) that must be accepted: any other answer throws. */
export async function acceptedTrack(url: string, tenant: { slug: string; key: string }, body: Record<string, unknown>): Promise<Reply> {
  const reply = await request(url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody(body) });
  if (reply.status !== 202) throw new Error(`track: ${reply.status} ${reply.text}`);
  return reply;
}

/** Identify that must be applied: any other answer throws. */
export async function appliedIdentify(url: string, tenant: { slug: string; key: string }, body: Record<string, unknown>): Promise<Reply> {
  const reply = await request(url, `/api/identify/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
  if (reply.status !== 200) throw new Error(`identify: ${reply.status} ${reply.text}`);
  return reply;
}

/** Top-level fields of a Segment-style call that Track and Identify accept and ignore. */
export const IGNORED_FIELDS = {
  sentAt: '2024-05-01T10:00:01Z',
  receivedAt: 'whenever',
  originalTimestamp: 12,
  channel: 'server',
  version: 2,
  writeKey: 'abc',
  projectId: null,
} as const;

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

export interface HalfSent {
  /** Sends the rest of the body. */
  finish(): void;
  /** The answer: status and X-Request-Id; status 0 and the client's error when the connection dropped (so an assertion names it). */
  reply: Promise<{ status: number; requestId: string; error?: string }>;
}

/**
 * `count` Track requests, each on its own connection with its headers and the first 20 bytes
 * of its body on the wire: requests a gateway holds in flight (for drain tests).
 */
export function halfSentTracks(url: string, slug: string, key: string, count: number): HalfSent[] {
  const { port } = new URL(url);
  return Array.from({ length: count }, () => {
    const body = Buffer.from(JSON.stringify(trackBody()));
    const req = http.request({
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: `/api/track/${slug}`,
      agent: false,
      headers: { 'x-api-key': key, 'content-type': 'application/json', 'content-length': body.length },
    });
    const reply = new Promise<{ status: number; requestId: string; error?: string }>((resolve) => {
      req.on('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, requestId: String(res.headers['x-request-id'] ?? '') });
      });
      req.on('error', (err) => resolve({ status: 0, requestId: '', error: `${Date.now()} ${err.message}` }));
    });
    req.write(body.subarray(0, 20));
    return { finish: () => req.end(body.subarray(20)), reply };
  });
}

export interface Exchange {
  /** Everything the server wrote, as latin1. */
  received: string;
  /** Whether the server closed the connection (rather than the test giving up after `waitMs`). */
  closedByServer: boolean;
}

/** Sends raw bytes (latin1) on a new connection and keeps it open; resolves when the server closes it, or after `waitMs`. */
export function rawExchange(url: string, bytes: string, waitMs = 5000): Promise<Exchange> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    let received = '';
    let gaveUp = false;
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(Buffer.from(bytes, 'latin1')));
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve({ received, closedByServer: !gaveUp }));
    setTimeout(() => ((gaveUp = true), socket.destroy()), waitMs).unref();
  });
}

export interface RawAnswer {
  status: number;
  /** Header names lowercased; a repeated header keeps its last value. */
  headers: Record<string, string>;
  body: string;
  /** The answer's bytes as received (latin1), head and body. */
  raw: string;
}

/**
 * The answers in `received` (what rawExchange returns), in the order they came: interim 1xx
 * answers have no body, others a Content-Length, chunked or close-delimited one. Bytes that are
 * no complete answer end the list under `rest`, so an assertion can name them.
 */
export function parseAnswers(received: string): { answers: RawAnswer[]; rest: string } {
  const answers: RawAnswer[] = [];
  let at = 0;
  while (at < received.length) {
    const headEnd = received.indexOf('\r\n\r\n', at);
    if (headEnd < 0 || !received.startsWith('HTTP/1.', at)) break;
    const [statusLine, ...lines] = received.slice(at, headEnd).split('\r\n');
    const status = Number(statusLine.split(' ')[1]);
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    let end = headEnd + 4;
    let body = '';
    if (status >= 200 || status === 101) {
      if (headers['content-length'] !== undefined) {
        end += Number(headers['content-length']);
        if (end > received.length) break;
        body = received.slice(headEnd + 4, end);
      } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        let size: number;
        do {
          const lineEnd = received.indexOf('\r\n', end);
          if (lineEnd < 0) return { answers, rest: received.slice(at) };
          size = parseInt(received.slice(end, lineEnd), 16);
          body += received.slice(lineEnd + 2, lineEnd + 2 + size);
          end = lineEnd + 2 + size + 2;
        } while (size > 0);
        if (end > received.length) break;
      } else {
        end = received.length;
        body = received.slice(headEnd + 4);
      }
    }
    answers.push({ status, headers, body, raw: received.slice(at, end) });
    at = end;
  }
  return { answers, rest: received.slice(at) };
}
