// platform/redis-answered-commands.ts: an answered ioredis command lets its arguments go, except
// where ioredis may send it again (a pipeline). Against the real Redis, through createRedis.
import { randomUUID } from 'node:crypto';
import test from 'ava';
import { Command } from 'ioredis';
import { createRedis, type SingleRedis } from '../../platform/redis.ts';
import { TEST_REDIS_URL } from '../helpers/services.ts';

const redis = createRedis({ redisUrl: TEST_REDIS_URL }, 'worker') as SingleRedis;
const key = (name: string) => `test:answered:${randomUUID()}:${name}`;
const payload = 'x'.repeat(24_000);

test.after.always(() => redis.disconnect());

test('a command answered by Redis drops its arguments; its answer is whole', async (t) => {
  const written = key('set');
  const set = new Command('set', [written, payload, 'EX', 60], { replyEncoding: 'utf8' });
  t.is(await redis.sendCommand(set), 'OK');
  t.deepEqual(set.args, [], 'the 24 KB argument is no longer held by the answered command');

  const get = new Command('get', [written], { replyEncoding: 'utf8' });
  t.is(await redis.sendCommand(get), payload);
  t.deepEqual(get.args, []);
});

test('a refused command keeps its arguments, so its error still names them', async (t) => {
  const list = key('list');
  await redis.rpush(list, 'a');
  await redis.expire(list, 60);
  const wrongType = new Command('get', [list]);
  const error = await t.throwsAsync(redis.sendCommand(wrongType) as Promise<unknown>);
  t.regex(error.message, /WRONGTYPE/);
  t.deepEqual(wrongType.args, [list]);
  t.deepEqual((error as Error & { command?: { args: unknown[] } }).command?.args, [list]);
});

test('commands of a pipeline or a transaction keep theirs: a redirected cluster pipeline sends them all again', async (t) => {
  const inPipeline = key('pipeline');
  const pipeline = redis.pipeline().set(inPipeline, payload, 'EX', 60).get(inPipeline);
  const results = await pipeline.exec();
  t.deepEqual(results, [
    [null, 'OK'],
    [null, payload],
  ]);
  const queued = (pipeline as unknown as { _queue: Command[] })._queue;
  t.deepEqual(
    queued.map((command) => command.args.length),
    [4, 1],
  );

  const inMulti = key('multi');
  const multi = redis.multi().set(inMulti, payload, 'EX', 60);
  await multi.exec();
  const transaction = (multi as unknown as { _queue: Command[] })._queue;
  t.true(
    transaction.some((command) => command.name === 'set' && command.args[1] === payload),
    'the SET of the transaction still holds its value',
  );
});

test('a script sent as EVALSHA to a Redis that has forgotten it is sent again whole', async (t) => {
  // BullMQ's commands are scripts: a NOSCRIPT answer is followed by a resend of the same arguments.
  const client = createRedis({ redisUrl: TEST_REDIS_URL }, 'worker') as SingleRedis & {
    echoLength(key: string, value: string): Promise<number>;
  };
  t.teardown(() => client.disconnect());
  client.defineCommand('echoLength', { numberOfKeys: 1, lua: 'return string.len(ARGV[1])' });
  t.is(await client.echoLength(key('script'), payload), payload.length);
  await client.script('FLUSH');
  t.is(await client.echoLength(key('script'), payload), payload.length);
});

test('an ioredis that no longer resolves commands through _convertValue is noticed', (t) => {
  // The hook platform/redis-answered-commands.ts wraps; an upgrade that renames it fails here.
  const prototype = Command.prototype as unknown as Record<string, unknown>;
  t.is(typeof prototype._convertValue, 'function');
  const command = new Command('ping');
  t.is(typeof (command as unknown as { isResolved: unknown }).isResolved, 'boolean');
});
