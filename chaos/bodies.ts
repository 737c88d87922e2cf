// The requests a run sends: valid Track and Identify bodies over a small pool of people (so
// calls collide), bodies the contract refuses, and pipelined writes whose second request Node's
// parser or its Expect handling refuses. Pure builders: the caller supplies the randomness and
// the service's time.
import type { Rng } from './prng.ts';

/** People of a run: few, so that calls of several clients meet on the same user IDs. */
export const POOL_SIZE = 36;
/** Users per email in the pool: with join-by-email, every three user IDs are one person. */
const USERS_PER_EMAIL = 3;

export const poolUser = (i: number) => `u-${i}`;
/** Each user ID keeps one email for the whole run (the checker relies on it: a shared email is a joined profile). */
export const homeEmail = (userId: string) => `p${Math.floor(Number(userId.trim().slice(2)) / USERS_PER_EMAIL)}@example.test`;

const EVENTS = ['Signed Up', 'Clicked', 'Purchased'];
const PLANS = ['free', 'pro', 'team', 'enterprise'];

export interface TrackRequest {
  messageId: string;
  userId: string | null;
  body: string;
}

export interface IdentifyRequest {
  messageId: string;
  userId: string;
  email: string | null;
  body: string;
}

/** A user ID of the pool as a client sends it: mostly plain, sometimes padded with spaces (the same person). */
export function spelledUser(rng: Rng): string {
  const id = poolUser(rng.int(POOL_SIZE));
  if (!rng.chance(0.12)) return id;
  return rng.pick([` ${id} `, `${id}  `, `  ${id}`]);
}

export function trackBody(rng: Rng, messageId: string, now: number, n: number): TrackRequest {
  const anonymous = rng.chance(0.12);
  const userId = anonymous ? null : spelledUser(rng);
  const body: Record<string, unknown> = {
    type: 'track',
    messageId,
    event: rng.pick(EVENTS),
    timestamp: new Date(now - rng.int(60_000)).toISOString(),
    properties: { n, plan: rng.pick(PLANS) },
  };
  if (userId !== null) body.userId = userId;
  else body.anonymousId = `anon-${rng.int(1000)}`;
  return { messageId, userId, body: JSON.stringify(body) };
}

export function identifyBody(messageId: string, userId: string, email: string | null, traits: Record<string, unknown>, timestamp: number): IdentifyRequest {
  const all = email === null ? traits : { email, ...traits };
  return { messageId, userId, email, body: JSON.stringify({ userId, messageId, timestamp: new Date(timestamp).toISOString(), traits: all }) };
}

/** A pool user's Identify: its home email, a plan, a counter; a time a little in the past of the service's clock. */
export function poolIdentify(rng: Rng, messageId: string, now: number, n: number): IdentifyRequest {
  const userId = spelledUser(rng);
  return identifyBody(messageId, userId, homeEmail(userId), { plan: rng.pick(PLANS), n }, now - rng.int(30_000));
}

/** The same messageId, user and time with other traits: a conflicting reuse (409). */
export function conflictingIdentify(original: { messageId: string; userId: string; email: string | null; body: string }, n: number): IdentifyRequest {
  const parsed = JSON.parse(original.body) as { timestamp: string; traits: Record<string, unknown> };
  return {
    messageId: original.messageId,
    userId: original.userId,
    email: original.email,
    body: JSON.stringify({
      userId: original.userId,
      messageId: original.messageId,
      timestamp: parsed.timestamp,
      traits: { ...parsed.traits, n: `conflict-${n}` },
    }),
  };
}

export interface BadRequest {
  api: 'track' | 'identify';
  what: string;
  messageId: string | null;
  userId: string | null;
  body: string;
}

/** A request the contract answers 400, carrying `messageId` and `userId` used nowhere else. */
export function badBody(rng: Rng, messageId: string, userId: string, now: number): BadRequest {
  const ts = new Date(now).toISOString();
  const cases: (() => BadRequest)[] = [
    () => ({
      api: 'track',
      what: 'userId a number',
      messageId,
      userId: null,
      body: JSON.stringify({ type: 'track', messageId, event: 'Bad', userId: 7, timestamp: ts }),
    }),
    () => ({ api: 'track', what: 'no event', messageId, userId, body: JSON.stringify({ type: 'track', messageId, userId, timestamp: ts }) }),
    () => ({
      api: 'track',
      what: 'a bad timestamp',
      messageId,
      userId,
      body: JSON.stringify({ type: 'track', messageId, event: 'Bad', userId, timestamp: '2024-02-30T10:00:00Z' }),
    }),
    () => ({
      api: 'track',
      what: 'properties null',
      messageId,
      userId,
      body: JSON.stringify({ type: 'track', messageId, event: 'Bad', userId, timestamp: ts, properties: null }),
    }),
    () => ({ api: 'track', what: 'no messageId', messageId: null, userId, body: JSON.stringify({ type: 'track', event: 'Bad', userId, timestamp: ts }) }),
    () => ({
      api: 'track',
      what: 'type identify',
      messageId,
      userId,
      body: JSON.stringify({ type: 'identify', messageId, event: 'Bad', userId, timestamp: ts }),
    }),
    () => ({ api: 'track', what: 'not JSON', messageId, userId, body: `{"type":"track","messageId":"${messageId}","userId":"${userId}"` }),
    () => ({ api: 'identify', what: 'userId a number', messageId, userId: null, body: JSON.stringify({ userId: 7, messageId, traits: { plan: 'x' } }) }),
    () => ({ api: 'identify', what: 'traits null', messageId, userId, body: JSON.stringify({ userId, messageId, traits: null }) }),
    () => ({ api: 'identify', what: 'no traits', messageId, userId, body: JSON.stringify({ userId, messageId, traits: {} }) }),
    () => ({
      api: 'identify',
      what: 'a timestamp without a zone',
      messageId,
      userId,
      body: JSON.stringify({ userId, messageId, timestamp: '2024-05-01T10:00:00', traits: { plan: 'x' } }),
    }),
    // An hour ahead of the service's (fake) clock: only a service on the same clock refuses it.
    () => ({
      api: 'identify',
      what: 'a timestamp an hour ahead',
      messageId,
      userId,
      body: JSON.stringify({ userId, messageId, timestamp: new Date(now + 3_600_000).toISOString(), traits: { plan: 'x' } }),
    }),
  ];
  return rng.pick(cases)();
}

export interface PipelineRequestPart {
  role: 'valid' | 'refused' | 'behind';
  api: 'track' | 'identify';
  messageId: string | null;
  userId: string | null;
}

export interface PipelinePlan {
  variant: string;
  parts: PipelineRequestPart[];
  bytes: string;
}

/** The refusals a pipelined write ends with. */
export const PIPELINE_VARIANTS = ['te-and-cl', 'bad-chunk', 'two-cl', 'garbage', 'expect'] as const;

/**
 * A valid request, then one refused, in one write: the refused one with Content-Length and
 * Transfer-Encoding, a bad chunk size, two Content-Lengths, a request line of garbage, or an
 * unknown Expect (then a third, valid request behind it). Every request has its own
 * messageId and userId (`ids(i)`), so what it stored is plain to see.
 */
export function pipelineWrite(rng: Rng, slug: string, key: string, now: number, ids: (i: number) => { messageId: string; userId: string }): PipelinePlan {
  const variant = rng.pick(PIPELINE_VARIANTS);
  const validApi = rng.chance(0.7) ? 'track' : 'identify';
  const request = (api: 'track' | 'identify', i: number, extra = '', framing?: 'te-and-cl' | 'bad-chunk' | 'two-cl') => {
    const { messageId, userId } = ids(i);
    const body =
      api === 'track'
        ? JSON.stringify({ type: 'track', messageId, event: 'Pipelined', userId, timestamp: new Date(now).toISOString() })
        : JSON.stringify({ userId, messageId, timestamp: new Date(now - 1000).toISOString(), traits: { plan: 'pipelined' } });
    const head = `POST /api/${api}/${slug} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Api-Key: ${key}\r\nContent-Type: application/json\r\n${extra}`;
    const length = Buffer.byteLength(body);
    let bytes: string;
    if (framing === 'te-and-cl') bytes = `${head}Transfer-Encoding: chunked\r\nContent-Length: ${length}\r\n\r\n${length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    else if (framing === 'bad-chunk') bytes = `${head}Transfer-Encoding: chunked\r\n\r\nzz\r\n${body}\r\n0\r\n\r\n`;
    else if (framing === 'two-cl') bytes = `${head}Content-Length: ${length}\r\nContent-Length: ${length + 1}\r\n\r\n${body}`;
    else bytes = `${head}Content-Length: ${length}\r\n\r\n${body}`;
    return { part: { api, messageId, userId } as const, bytes: Buffer.from(bytes, 'utf8').toString('latin1') };
  };
  const first = request(validApi, 0);
  const parts: PipelineRequestPart[] = [{ role: 'valid', ...first.part }];
  let bytes = first.bytes;
  if (variant === 'garbage') {
    bytes += 'GARBAGE\r\n\r\n';
    parts.push({ role: 'refused', api: 'track', messageId: null, userId: null });
  } else if (variant === 'expect') {
    const refused = request('track', 1, 'Expect: foo\r\n');
    const behind = request(validApi, 2);
    parts.push({ role: 'refused', ...refused.part }, { role: 'behind', ...behind.part });
    bytes += refused.bytes + behind.bytes;
  } else {
    const refused = request('track', 1, '', variant);
    parts.push({ role: 'refused', ...refused.part });
    bytes += refused.bytes;
  }
  return { variant, parts, bytes };
}
