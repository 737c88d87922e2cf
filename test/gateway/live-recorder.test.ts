// The live view's recorder (gateway/live/recorder.ts) against the real Redis: the newest
// LIVE_IDENTIFY_CALLS calls of each environment, oldest first in the stream, with their outcome
// and changed traits' names; the rates' counts since the last write; and a Redis that hangs
// never holds a gateway's shutdown.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import test from 'ava';
import { identifyCallsKey, minuteOf, ratesKey } from '../../platform/live-keys.ts';
import { createLogger } from '../../platform/logger.ts';
import { createRedis } from '../../platform/redis.ts';
import type { IdentifyCall, Plan } from '../../identify/identify-plan.ts';
import { createLiveRecorder } from '../../gateway/live/recorder.ts';
import { startFreezableProxy } from '../helpers/proxy.ts';
import { TEST_REDIS_URL, testEnv } from '../helpers/services.ts';

const log = createLogger('silent', 'test-live');
const OFF = 3_600_000; // the timers never fire: close() writes

/** The gateway's fail-fast connection (producer), once it is up. */
async function producer(url = TEST_REDIS_URL) {
  const redis = createRedis({ redisUrl: url }, 'producer');
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  return redis;
}

const calls = (env: string, users: string[]) =>
  users.map((u, i) => ({ envId: env, messageId: `m-${u}-${i}`, input: { userId: u } })) as unknown as IdentifyCall[];
const plan = (verdicts: string[], changed: string[][]) => ({ verdicts, changed }) as unknown as Plan;

/** A recorder whose timers never fire (close() writes), keeping `keep` calls per environment. */
const recorderOf = (
  redis: Awaited<ReturnType<typeof producer>>,
  prefix: string,
  keep: number,
  requestTotals = () => [] as { route: string; status: string; count: number }[],
) => createLiveRecorder({ config: { queuePrefix: prefix, liveIdentifyCalls: keep }, redis, requestTotals, log, identifyEveryMs: OFF, ratesEveryMs: OFF });

test('the newest calls of each environment, with outcome and changed traits, and the answers counted since the last write', async (t) => {
  const redis = await producer();
  const prefix = testEnv().QUEUE_PREFIX;
  let totals = [
    { route: 'identify', status: '200', count: 5 },
    { route: 'track', status: '202', count: 7 },
  ];
  const recorder = recorderOf(redis, prefix, 3, () => totals);
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });
  recorder.identifyCommitted(calls('a', ['u1', 'u2']), plan(['applied', 'duplicate'], [['email'], []]));
  recorder.identifyCommitted(calls('b', ['v1']), plan(['conflict'], [[]]));
  recorder.identifyCommitted(calls('a', ['u3', 'u4']), plan(['applied', 'applied'], [['plan', 'name'], ['plan']]));
  // Counted before the recorder started: not this minute's; these are.
  totals = [
    { route: 'identify', status: '200', count: 9 },
    { route: 'track', status: '202', count: 7 },
    { route: 'healthz', status: '200', count: 3 },
  ];
  await recorder.close();

  const fields = async (env: string) =>
    (await redis.xrange(identifyCallsKey(prefix, env), '-', '+')).map(([, f]) => Object.fromEntries(f.flatMap((v, i) => (i % 2 ? [] : [[v, f[i + 1]]]))));
  t.deepEqual(await fields('a'), [
    { u: 'u2', m: 'm-u2-1', o: 'duplicate', c: '[]' },
    { u: 'u3', m: 'm-u3-0', o: 'applied', c: '["plan","name"]' },
    { u: 'u4', m: 'm-u4-1', o: 'applied', c: '["plan"]' },
  ]);
  t.deepEqual(await fields('b'), [{ u: 'v1', m: 'm-v1-0', o: 'conflict', c: '[]' }]);
  t.true((await redis.pttl(identifyCallsKey(prefix, 'a'))) > 0, 'the stream expires');
  t.deepEqual(await redis.hgetall(ratesKey(prefix, minuteOf(Date.now()))), { 'identify:200': '4' });
});

test('a handed-over batch is not held until the write: only what the view shows of its calls is', async (t) => {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  const redis = await producer();
  const prefix = testEnv().QUEUE_PREFIX;
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });
  const recorder = recorderOf(redis, prefix, 2);
  // A committed batch's calls carry their bodies and plans: held for a second, they would outlive the young generation.
  const handOver = () => {
    const batch = calls('a', ['u1', 'u2', 'u3']);
    const committed = plan(['applied', 'applied', 'duplicate'], [['email'], ['plan'], []]);
    recorder.identifyCommitted(batch, committed);
    return [new WeakRef(batch), new WeakRef(committed)];
  };
  const refs = handOver();
  await new Promise((resolve) => setTimeout(resolve, 10));
  gc();
  t.deepEqual(
    refs.map((r) => r.deref()),
    [undefined, undefined],
  );
  await recorder.close();
  const written = (await redis.xrange(identifyCallsKey(prefix, 'a'), '-', '+')).map(([, f]) => f);
  t.deepEqual(written, [
    ['u', 'u2', 'm', 'm-u2-1', 'o', 'applied', 'c', '["plan"]'],
    ['u', 'u3', 'm', 'm-u3-2', 'o', 'duplicate', 'c', '[]'],
  ]);
});

test('LIVE_IDENTIFY_CALLS=0 records no call', async (t) => {
  const redis = await producer();
  t.teardown(() => redis.disconnect());
  const prefix = testEnv().QUEUE_PREFIX;
  const recorder = recorderOf(redis, prefix, 0);
  recorder.identifyCommitted(calls('a', ['u1']), plan(['applied'], [['x']]));
  await recorder.close();
  t.is(await redis.exists(identifyCallsKey(prefix, 'a')), 0);
});

test('a Redis that hangs: close() gives up its last write within about a second', async (t) => {
  const proxy = await startFreezableProxy(TEST_REDIS_URL);
  t.teardown(() => proxy.close());
  const redis = await producer(proxy.url(TEST_REDIS_URL));
  t.teardown(() => redis.disconnect());
  const prefix = testEnv().QUEUE_PREFIX;
  const recorder = createLiveRecorder({
    config: { queuePrefix: prefix, liveIdentifyCalls: 10 },
    redis,
    requestTotals: () => [],
    log,
    identifyEveryMs: 50,
    ratesEveryMs: OFF,
  });
  proxy.freeze();
  for (let i = 0; i < 10; i++) {
    recorder.identifyCommitted(calls('a', ['u1']), plan(['applied'], [['x']]));
    await new Promise((r) => setTimeout(r, 60));
  }
  const started = performance.now();
  await recorder.close();
  const ms = performance.now() - started;
  t.true(ms < 3000, `close took ${Math.round(ms)} ms`);
  proxy.restore();
});
