// What a gateway writes for the dashboard's live view (gateway/live/pages.ts), off the request
// path: a request pays nothing for it. Identify batches hand over their calls and plan after
// commit (one array push per batch); once a second the newest LIVE_IDENTIFY_CALLS calls of each
// environment go to that environment's Redis stream in one pipeline. Every 10 s the answers
// counted since the last write (the request metrics' cells) are added to the current minute's
// hash. A Redis that is away or full costs a skipped write, never a request.
import type { Config } from '../../platform/config.ts';
import { identifyCallsKey, LIVE_ROUTES, LIVE_WINDOW_MS, liveKeyPrefix, minuteOf, ratesKey } from '../../platform/live-keys.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Redis } from '../../platform/redis.ts';
import type { IdentifyCall, Plan } from '../../identify/identify-plan.ts';
import { withTimeout } from '../../platform/with-timeout.ts';
import { singleWrite } from './single-write.ts';

export interface LiveRecorder {
  /** A committed Identify batch (createIdentifyBatcher's onCommitted, handlers/identify.ts). */
  identifyCommitted(calls: IdentifyCall[], plan: Plan): void;
  /** Writes the Identify calls handed over so far (SingleWrite.flush). */
  flush(): Promise<void>;
  /** Writes what is pending and stops. */
  close(): Promise<void>;
}

export interface LiveRecorderDeps {
  config: Pick<Config, 'queuePrefix' | 'liveIdentifyCalls'> & Partial<Pick<Config, 'redisClusterNodes'>>;
  redis: Redis;
  /** Requests answered so far by route and status (gateway-metrics.ts). */
  requestTotals: () => { route: string; status: string; count: number }[];
  log: Logger;
  /** Test seams: how often each part is written. */
  identifyEveryMs?: number;
  ratesEveryMs?: number;
}

const ROUTES = new Set<string>(LIVE_ROUTES);
/** How long close() waits for its last write. */
const CLOSE_WRITE_MS = 1000;
/** Rates hashes outlive the window a little, so the oldest minute plotted is still whole. */
const RATES_TTL_S = Math.ceil((LIVE_WINDOW_MS * 2) / 1000);

export function createLiveRecorder(deps: LiveRecorderDeps): LiveRecorder {
  const { config, redis, log } = deps;
  const keep = config.liveIdentifyCalls;
  let batches: { calls: IdentifyCall[]; plan: Plan }[] = [];
  let pendingCalls = 0;
  const sent = new Map<string, number>();
  let lastWarning = 0;

  const warn = (err: unknown) => {
    // One line a minute at most: a Redis outage is reported by the gateway's own warnings.
    if (Date.now() - lastWarning < 60_000) return;
    lastWarning = Date.now();
    log.warn({ err: (err as Error).message }, 'live view not written');
  };

  /** The newest `keep` calls of each environment in the batches handed over, oldest first. */
  function takeCalls(): Map<string, [string, string, string, string][]> {
    const byEnv = new Map<string, [string, string, string, string][]>();
    const taken = batches;
    batches = [];
    pendingCalls = 0;
    for (let b = taken.length - 1; b >= 0; b--) {
      const { calls, plan } = taken[b];
      for (let i = calls.length - 1; i >= 0; i--) {
        let list = byEnv.get(calls[i].envId);
        if (!list) byEnv.set(calls[i].envId, (list = []));
        if (list.length >= keep) continue;
        list.push([calls[i].input.userId, calls[i].messageId, plan.verdicts[i], JSON.stringify(plan.changed[i] ?? [])]);
      }
    }
    for (const list of byEnv.values()) list.reverse();
    return byEnv;
  }

  async function writeIdentifyCalls(): Promise<void> {
    if (!batches.length) return;
    const byEnv = takeCalls();
    const pipeline = redis.pipeline();
    const oldest = Date.now() - LIVE_WINDOW_MS;
    for (const [envId, list] of byEnv) {
      const key = identifyCallsKey(liveKeyPrefix(config), envId);
      for (const [u, m, o, c] of list) pipeline.xadd(key, 'MAXLEN', '~', keep, '*', 'u', u, 'm', m, 'o', o, 'c', c);
      pipeline.xtrim(key, 'MINID', '~', `${oldest}-0`);
      pipeline.pexpire(key, LIVE_WINDOW_MS);
    }
    await pipeline.exec();
  }

  async function writeRates(): Promise<void> {
    const key = ratesKey(liveKeyPrefix(config), minuteOf(Date.now()));
    const pipeline = redis.pipeline();
    const counted: [string, number][] = [];
    for (const { route, status, count } of deps.requestTotals()) {
      if (!ROUTES.has(route)) continue;
      const field = `${route}:${status}`;
      const delta = count - (sent.get(field) ?? 0);
      if (delta <= 0) continue;
      pipeline.hincrby(key, field, delta);
      counted.push([field, count]);
    }
    if (!counted.length) return;
    pipeline.expire(key, RATES_TTL_S);
    const results = await pipeline.exec();
    const failed = results?.find(([err]) => err);
    // A refused write leaves its counts to the next one.
    if (failed) throw failed[0];
    for (const [field, count] of counted) sent.set(field, count);
  }

  // Answers before the recorder started are not this minute's.
  for (const { route, status, count } of deps.requestTotals()) sent.set(`${route}:${status}`, count);
  const rates = singleWrite(writeRates, warn);
  const calls = singleWrite(writeIdentifyCalls, warn);

  const callsTimer = keep > 0 ? setInterval(calls.tick, deps.identifyEveryMs ?? 1000) : undefined;
  const ratesTimer = setInterval(rates.tick, deps.ratesEveryMs ?? 10_000);
  callsTimer?.unref();
  ratesTimer.unref();

  return {
    identifyCommitted(calls, plan) {
      if (keep === 0) return;
      // Bounded whatever Redis does: beyond a few seconds' worth the oldest batches are dropped.
      if (pendingCalls > keep * 8 && batches.length > 1) pendingCalls -= batches.shift()!.calls.length;
      batches.push({ calls, plan });
      pendingCalls += calls.length;
    },
    flush: calls.flush,
    async close() {
      clearInterval(callsTimer);
      clearInterval(ratesTimer);
      // The last second's calls and counts, unless Redis does not answer soon: shutdown does not wait on it.
      await withTimeout(Promise.all([calls.tick(), rates.tick()]), CLOSE_WRITE_MS, 'live view').catch(warn);
    },
  };
}
