// The refused calls' recorder (gateway/live/refused-recorder.ts) against the real Redis, through
// its own interface: what one entry keeps (suffix, never the key; bodies cut, a surrogate pair
// never split), the rate per list, the lists' bound, REFUSED_CALLS_KEPT=0, and the erasure of the
// calls whose (cut) body names a person.
import test from 'ava';
import { createRefusedRecorder, type RefusedContext } from '../../gateway/live/refused-recorder.ts';
import { forgetRefusedCalls, REFUSED_BODY_CHARS, REFUSED_UNKNOWN, refusedCallsKey, type RefusedCallEntry } from '../../platform/live-keys.ts';
import { createLogger } from '../../platform/logger.ts';
import { createRedis } from '../../platform/redis.ts';
import { TEST_REDIS_URL, testEnv } from '../helpers/services.ts';

const log = createLogger('silent', 'test-refused');
const OFF = 3_600_000; // the timer never fires: close() writes

async function producer() {
  const redis = createRedis({ redisUrl: TEST_REDIS_URL }, 'producer');
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
  return redis;
}

const KEY = `itk_${'A'.repeat(35)}tail5`;
const ctx = (
  over: Partial<RefusedContext['state']> = {},
  headers: RefusedContext['req']['headers'] = { 'x-api-key': KEY },
  body: unknown = '{"error":"Invalid JSON"}',
) =>
  ({
    state: { requestId: 'r-1', pathValue: 'acme', environment: { id: 'env-1' } as never, ...over },
    req: { headers },
    body,
  }) as RefusedContext;

async function setUp(t: import('ava').ExecutionContext, config: { refusedCallsKept: number; refusedCallsPerSecond: number }) {
  const redis = await producer();
  const prefix = testEnv().QUEUE_PREFIX;
  const recorder = createRefusedRecorder({ config: { queuePrefix: prefix, ...config }, redis, log, everyMs: OFF });
  t.teardown(async () => {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  });
  const list = async (id: string) => (await redis.lrange(refusedCallsKey(prefix, id), 0, -1)).map((e) => JSON.parse(e) as RefusedCallEntry);
  return { redis, prefix, recorder, list };
}

test('an entry keeps the suffix, never the key; bodies are cut without splitting a surrogate pair; no key, a short key', async (t) => {
  const { recorder, list } = await setUp(t, { refusedCallsKept: 10, refusedCallsPerSecond: 100 });
  const long = `${'x'.repeat(REFUSED_BODY_CHARS - 1)}😀 and more`;
  recorder.refused(ctx({ rawBody: long }), 'track', 400, 'Invalid JSON');
  recorder.refused(ctx({ environment: undefined }, {}), 'track', 401, 'Missing API key');
  recorder.refused(ctx({ environment: undefined }, { authorization: 'Bearer short' }), 'track', 401, 'Invalid API key');
  await recorder.close();
  const [entry] = await list('env-1');
  t.is(entry.k, 'tail5');
  t.false(JSON.stringify(entry).includes(KEY));
  t.is(entry.b, 'x'.repeat(REFUSED_BODY_CHARS - 1));
  t.is(entry.bl, long.length);
  t.is(entry.e, '{"error":"Invalid JSON"}');
  t.deepEqual(
    (await list(REFUSED_UNKNOWN)).map((e) => [e.c, e.k]),
    [
      ['Invalid API key', ''],
      ['Missing API key', undefined],
    ],
  );
});

test('at most REFUSED_CALLS_PER_SECOND calls per list between writes; each list trimmed to REFUSED_CALLS_KEPT, newest first', async (t) => {
  const { recorder, list, redis, prefix } = await setUp(t, { refusedCallsKept: 4, refusedCallsPerSecond: 3 });
  for (let i = 0; i < 1000; i++) recorder.refused(ctx({ requestId: `a-${i}` }), 'track', 400, 'Invalid JSON');
  for (let i = 0; i < 1000; i++) recorder.refused(ctx({ requestId: `u-${i}`, environment: undefined }), 'track', 401, 'Invalid API key');
  await recorder.close();
  t.deepEqual(
    (await list('env-1')).map((e) => e.id),
    ['a-2', 'a-1', 'a-0'],
  );
  t.is((await list(REFUSED_UNKNOWN)).length, 3);
  // Two more writes' worth: the list keeps the newest 4.
  const again = createRefusedRecorder({ config: { queuePrefix: prefix, refusedCallsKept: 4, refusedCallsPerSecond: 3 }, redis, log, everyMs: OFF });
  for (let i = 3; i < 6; i++) again.refused(ctx({ requestId: `a-${i}` }), 'track', 400, 'Invalid JSON');
  await again.close();
  t.deepEqual(
    (await list('env-1')).map((e) => e.id),
    ['a-5', 'a-4', 'a-3', 'a-2'],
  );
  t.true((await redis.pttl(refusedCallsKey(prefix, 'env-1'))) > 0);
});

test('REFUSED_CALLS_KEPT=0 records nothing', async (t) => {
  const { recorder, redis, prefix } = await setUp(t, { refusedCallsKept: 0, refusedCallsPerSecond: 10 });
  recorder.refused(ctx(), 'track', 400, 'Invalid JSON');
  await recorder.close();
  t.is(await redis.exists(refusedCallsKey(prefix, 'env-1')), 0);
});

test('forgetting a person removes the calls whose body names them, a body cut inside the ID included, and no other', async (t) => {
  const { recorder, list, redis, prefix } = await setUp(t, { refusedCallsKept: 10, refusedCallsPerSecond: 100 });
  const id = 'person-with-a-long-id';
  recorder.refused(ctx({ requestId: 'named', rawBody: `{"userId":"${id}","x":` }), 'track', 400, 'Invalid JSON');
  // Cut inside the ID: the body's first 2 KiB end with "person-with-a-l.
  const pad = 'p'.repeat(REFUSED_BODY_CHARS - 33);
  recorder.refused(ctx({ requestId: 'cut', rawBody: `{"x":"${pad}","userId":"${id}"}` }), 'track', 400, 'Invalid JSON');
  recorder.refused(ctx({ requestId: 'other', rawBody: '{"userId":"someone-else"' }), 'track', 400, 'Invalid JSON');
  recorder.refused(ctx({ requestId: 'escaped', rawBody: '{"userId":"quote\\"d"' }), 'track', 400, 'Invalid JSON');
  await recorder.close();
  t.true((await list('env-1')).find((e) => e.id === 'cut')!.b!.endsWith('"person-with-a-l'));
  t.is(await forgetRefusedCalls(redis, prefix, 'env-1', [id, 'quote"d']), 3);
  t.deepEqual(
    (await list('env-1')).map((e) => e.id),
    ['other'],
  );
});
