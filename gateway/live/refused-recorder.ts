// What a gateway writes for the console's Refused calls page (gateway/console/pages/refused.ts):
// a sampled record of its 4xx answers, off the request path. The request log hands over each
// refused request (one answered with a 4xx by answerError, so `ctx.state.refusal` is set);
// an accepted request is never handed over and pays nothing. Per environment (and for the calls
// refused before an environment is known) at most REFUSED_CALLS_PER_SECOND calls a second are
// kept: each kept call is written out then (key suffix, bodies cut to REFUSED_BODY_CHARS), any
// other is dropped. Once a second the kept calls go to their lists in one pipeline, which
// trims each list to REFUSED_CALLS_KEPT entries. So a flood of bad calls costs a counter per
// call, bounded memory in the process and bounded lists in Redis. A Redis that is away or full
// costs a skipped write, never a request.
import type { Config } from '../../platform/config.ts';
import { extractApiKey, keySuffix } from '../../environments/api-key.ts';
import { liveKeyPrefix, REFUSED_BODY_CHARS, REFUSED_TTL_MS, REFUSED_UNKNOWN, refusedCallsKey, type RefusedCallEntry } from '../../platform/live-keys.ts';
import type { Logger } from '../../platform/logger.ts';
import type { Redis } from '../../platform/redis.ts';
import { withTimeout } from '../../platform/with-timeout.ts';
import { singleWrite } from './single-write.ts';
import type { IngestState } from '../state.ts';

/** What the recorder reads of a refused request's context. */
export interface RefusedContext {
  state: Partial<Pick<IngestState, 'environment' | 'pathValue' | 'rawBody' | 'requestId'>>;
  params?: Record<string, string | undefined>;
  req: { headers: { 'x-api-key'?: string | string[]; authorization?: string } };
  body: unknown;
}

export interface RefusedRecorder {
  /** A request answered with a 4xx by answerError (called by the request log, after the answer). */
  refused(ctx: RefusedContext, route: string, status: number, refusal: string): void;
  /** Writes the refused calls handed over so far (SingleWrite.flush). */
  flush(): Promise<void>;
  /** Writes what is pending and stops. */
  close(): Promise<void>;
}

export interface RefusedRecorderDeps {
  config: Pick<Config, 'queuePrefix' | 'refusedCallsKept' | 'refusedCallsPerSecond'> & Partial<Pick<Config, 'redisClusterNodes'>>;
  redis: Redis;
  log: Logger;
  /** Test seam: how often the kept calls are written. */
  everyMs?: number;
}

/** A key shorter than this is not shown at all: its last 5 characters would be most of it. */
const MIN_KEY_FOR_SUFFIX = 16;
/** Characters kept of the refusal and of the path value. */
const REFUSAL_CHARS = 512;
const PATH_VALUE_CHARS = 64;
const CLOSE_WRITE_MS = 1000;

/** The first `n` characters as a string of its own (not a slice holding on to a large body), a surrogate pair never split. */
function cut(text: string, n: number): string {
  if (text.length <= n) return text;
  const end = /[\ud800-\udbff]/.test(text[n - 1]) ? n - 1 : n;
  return Buffer.from(text.slice(0, end), 'utf16le').toString('utf16le');
}

export function createRefusedRecorder(deps: RefusedRecorderDeps): RefusedRecorder {
  const { config, redis, log } = deps;
  const keep = config.refusedCallsKept;
  const perSecond = config.refusedCallsPerSecond;
  const prefix = liveKeyPrefix(config);
  /** Calls taken this second per list; cleared by each write (so its size is the lists written to in a second). */
  let taken = new Map<string, number>();
  /** Kept calls per list, oldest first, as written entries. */
  let pending = new Map<string, string[]>();
  let lastWarning = 0;

  const warn = (err: unknown) => {
    if (Date.now() - lastWarning < 60_000) return;
    lastWarning = Date.now();
    log.warn({ err: (err as Error).message }, 'refused calls not written');
  };

  async function write(): Promise<void> {
    const lists = pending;
    pending = new Map();
    taken = new Map();
    if (!lists.size) return;
    const pipeline = redis.pipeline();
    for (const [listId, entries] of lists) {
      const key = refusedCallsKey(prefix, listId);
      // Oldest first: the newest ends at the head.
      pipeline.lpush(key, ...entries);
      pipeline.ltrim(key, 0, keep - 1);
      pipeline.pexpire(key, REFUSED_TTL_MS);
    }
    await pipeline.exec();
  }

  const writes = singleWrite(write, warn);
  const timer = keep > 0 ? setInterval(writes.tick, deps.everyMs ?? 1000) : undefined;
  timer?.unref();

  return {
    refused(ctx, route, status, refusal) {
      if (keep === 0) return;
      const environment = ctx.state.environment;
      const listId = environment ? environment.id : REFUSED_UNKNOWN;
      const count = taken.get(listId) ?? 0;
      if (count >= perSecond) return;
      taken.set(listId, count + 1);
      const key = extractApiKey(ctx.req.headers);
      const body = ctx.state.rawBody;
      const entry: RefusedCallEntry = {
        t: Date.now(),
        r: route,
        s: status,
        c: cut(refusal, REFUSAL_CHARS),
        e: typeof ctx.body === 'string' ? cut(ctx.body, REFUSED_BODY_CHARS) : '',
        id: ctx.state.requestId ?? '',
        p: cut(ctx.state.pathValue ?? ctx.params?.orgSlug ?? '', PATH_VALUE_CHARS),
      };
      if (key !== null) entry.k = key.length >= MIN_KEY_FOR_SUFFIX ? keySuffix(key) : '';
      if (typeof body === 'string') {
        entry.b = cut(body, REFUSED_BODY_CHARS);
        entry.bl = body.length;
      }
      let list = pending.get(listId);
      if (!list) pending.set(listId, (list = []));
      list.push(JSON.stringify(entry));
    },
    flush: writes.flush,
    async close() {
      clearInterval(timer);
      await withTimeout(writes.tick(), CLOSE_WRITE_MS, 'refused calls').catch(warn);
    },
  };
}
