// What a gateway writes for the dashboard's live view (gateway/live/pages.ts), off the request
// path: a request pays nothing for it. Identify batches hand over their calls after commit: each
// takes a slot in its environment's ring of the newest LIVE_IDENTIFY_CALLS, and once a second
// what the rings took since the last write goes to each environment's Redis stream in one
// pipeline. Every 10 s the answers counted since the last write (the request metrics' cells) are
// added to the current minute's hash. A Redis that is away or full costs a skipped write, never a
// request.
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

/** A call as the live view shows it: its user, messageId, outcome and changed traits' names. */
type LiveCall = readonly [user: string, messageId: string, outcome: string, changed: readonly string[]];

/**
 * The newest calls of one environment since the last write, at most `keep`. A ring rather than
 * the committed batches themselves: a batch's calls hold their bodies, plans and profiles, and
 * held for the second between writes they outlived two scavenges at any real rate, so V8
 * promoted them (two thirds of what Identify promoted). A slot is overwritten within
 * milliseconds under load, so what it held dies young.
 */
class CallRing {
  private readonly slots: LiveCall[] = [];
  private next = 0;
  constructor(private readonly keep: number) {}

  add(call: LiveCall): void {
    this.slots[this.next] = call;
    this.next = (this.next + 1) % this.keep;
  }

  /** Oldest first. */
  calls(): LiveCall[] {
    return this.slots.length < this.keep ? this.slots : [...this.slots.slice(this.next), ...this.slots.slice(0, this.next)];
  }
}

/** How long close() waits for its last write. */
const CLOSE_WRITE_MS = 1000;
/** Rates hashes outlive the window a little, so the oldest minute plotted is still whole. */
const RATES_TTL_S = Math.ceil((LIVE_WINDOW_MS * 2) / 1000);

export function createLiveRecorder(deps: LiveRecorderDeps): LiveRecorder {
  const { config, redis, log } = deps;
  const keep = config.liveIdentifyCalls;
  /** environment id → its calls since the last write. */
  let rings = new Map<string, CallRing>();
  const sent = new Map<string, number>();
  let lastWarning = 0;

  const warn = (err: unknown) => {
    // One line a minute at most: a Redis outage is reported by the gateway's own warnings.
    if (Date.now() - lastWarning < 60_000) return;
    lastWarning = Date.now();
    log.warn({ err: (err as Error).message }, 'live view not written');
  };

  async function writeIdentifyCalls(): Promise<void> {
    if (!rings.size) return;
    const taken = rings;
    rings = new Map();
    const pipeline = redis.pipeline();
    const oldest = Date.now() - LIVE_WINDOW_MS;
    for (const [envId, ring] of taken) {
      const key = identifyCallsKey(liveKeyPrefix(config), envId);
      for (const [u, m, o, c] of ring.calls()) pipeline.xadd(key, 'MAXLEN', '~', keep, '*', 'u', u, 'm', m, 'o', o, 'c', JSON.stringify(c));
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
      // Bounded whatever Redis does: a ring keeps its environment's newest `keep`.
      for (let i = 0; i < calls.length; i++) {
        const call = calls[i];
        let ring = rings.get(call.envId);
        if (!ring) rings.set(call.envId, (ring = new CallRing(keep)));
        ring.add([call.input.userId, call.messageId, plan.verdicts[i], plan.changed[i]]);
      }
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
