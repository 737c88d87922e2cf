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
