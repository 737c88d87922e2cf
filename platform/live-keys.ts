// The Redis keys of the dashboard's live view: gateways write them off the request path
// (gateway/live/recorder.ts), the dashboard reads them (gateway/live/data.ts). Under the queue
// prefix, so one Redis serves several deployments (and test files) apart.

/**
 * What the live view's keys start with: the queue prefix, and on a Redis Cluster one hash tag
 * (`{<prefix>:live}`) so that a gateway's pipeline of writes and the dashboard's pipeline of
 * reads, which span several keys, each go to one node.
 */
export const liveKeyPrefix = (config: { queuePrefix: string; redisClusterNodes?: readonly string[] }) =>
  config.redisClusterNodes?.length ? `{${config.queuePrefix}:live}` : config.queuePrefix;

/** Newest Identify calls of one environment: a stream trimmed to LIVE_IDENTIFY_CALLS entries and to LIVE_WINDOW_MS. */
export const identifyCallsKey = (prefix: string, environmentId: string) => `${prefix}:live:identify:${environmentId}`;

/** Answers per minute: one hash per minute, a field per `<route>:<status>` (its count over every gateway). */
export const ratesKey = (prefix: string, minute: number) => `${prefix}:live:rates:${minute}`;

/** How far back the live view looks: an hour of rates, Identify calls of the last hour. */
export const LIVE_WINDOW_MS = 3_600_000;

/** The minute (epoch minutes) a time falls in. */
export const minuteOf = (ms: number) => Math.floor(ms / 60_000);

/** The routes whose rates the live view plots. */
export const LIVE_ROUTES = ['track', 'identify', 'profiles'] as const;
export type LiveRoute = (typeof LIVE_ROUTES)[number];

/** One Identify call as the stream keeps it (field names kept short: every entry carries them). */
export interface IdentifyCallEntry {
  /** userId as sent. */
  u: string;
  /** messageId. */
  m: string;
  /** applied, duplicate or conflict. */
  o: string;
  /** Names of the traits it changed, JSON array. */
  c: string;
}

/**
 * Removes the live view's entries of these user IDs from an environment's stream (intake users
 * forget): the stream keeps raw user IDs for up to LIVE_WINDOW_MS. Returns how many it removed.
 */
export async function forgetLiveCalls(
  redis: { xrange(key: string, start: string, end: string): Promise<[string, string[]][]>; xdel(key: string, ...ids: string[]): Promise<number> },
  prefix: string,
  environmentId: string,
  userIds: readonly string[],
): Promise<number> {
  const key = identifyCallsKey(prefix, environmentId);
  const wanted = new Set(userIds);
  const ids: string[] = [];
  for (const [id, fields] of await redis.xrange(key, '-', '+')) {
    for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === 'u' && wanted.has(fields[i + 1].trim())) ids.push(id);
  }
  return ids.length ? redis.xdel(key, ...ids) : 0;
}

/**
 * Refused calls (4xx answers) of one environment, newest first: a list trimmed to
 * REFUSED_CALLS_KEPT entries (gateway/live/refused-recorder.ts). Calls refused before an
 * environment is known (a bad path value, a missing or unknown key) go to one list of their own,
 * REFUSED_UNKNOWN: their path value is the caller's word, so a list per path value would let a
 * caller make lists without end.
 */
export const refusedCallsKey = (prefix: string, environmentId: string) => `${prefix}:live:refused:${environmentId}`;

/** The list id of calls refused before an environment was known (environment ids are UUIDs: never this). */
export const REFUSED_UNKNOWN = 'unknown';

/** How long a list outlives its last write. */
export const REFUSED_TTL_MS = 86_400_000;

/** Characters of a refused call's body, and of the error body answered, that are kept. */
export const REFUSED_BODY_CHARS = 2048;

/** One refused call as its list keeps it (JSON; field names kept short: every entry carries them). */
export interface RefusedCallEntry {
  /** When it was answered (ms). */
  t: number;
  /** The route's name. */
  r: string;
  /** HTTP status. */
  s: number;
  /** The check that refused it (the request log's `refusal`). */
  c: string;
  /** The error body answered, its first REFUSED_BODY_CHARS characters. */
  e: string;
  /** The last 5 characters of the key sent; '' for a key too short to show any of; absent without a key. */
  k?: string;
  /** Request id (X-Request-Id). */
  id: string;
  /** The path value asked for, as sent (at most 64 characters). */
  p: string;
  /** The body's first REFUSED_BODY_CHARS characters, when it was read; `bl` its length. */
  b?: string;
  bl?: number;
}

/**
 * Removes the refused calls of an environment whose body names one of these user IDs (intake users
 * forget). Only an environment's own list holds bodies: every call refused before its environment
 * is known was refused before its body was read. Returns how many it removed.
 */
export async function forgetRefusedCalls(
  redis: { lrange(key: string, start: number, stop: number): Promise<string[]>; lrem(key: string, count: number, value: string): Promise<number> },
  prefix: string,
  environmentId: string,
  userIds: readonly string[],
): Promise<number> {
  const key = refusedCallsKey(prefix, environmentId);
  // Each ID as it may be written in the body: as is, and as JSON escapes it.
  const spellings = [...new Set(userIds.flatMap((id) => [id, JSON.stringify(id).slice(1, -1)]))].filter((s) => s !== '');
  let removed = 0;
  for (const entry of await redis.lrange(key, 0, -1)) {
    let parsed: RefusedCallEntry;
    try {
      parsed = JSON.parse(entry) as RefusedCallEntry;
    } catch {
      continue;
    }
    const texts = [parsed.b ?? '', parsed.e];
    // A body cut inside a string that begins as an ID does (the cut may fall within the ID) counts too.
    const cutTail = parsed.b !== undefined && (parsed.bl ?? 0) > parsed.b.length ? parsed.b.slice(parsed.b.lastIndexOf('"') + 1) : '';
    const names = spellings.some((id) => texts.some((text) => text.includes(id)) || (cutTail !== '' && id.startsWith(cutTail)));
    if (names) removed += await redis.lrem(key, 0, entry);
  }
  return removed;
}
