import test from 'ava';
import { ReplyError } from 'ioredis';
import { estimatedJobBytes, highWaterMark, isOomError, parseMemoryInfo, roomAgainBelow, WORKER_HEADROOM_BYTES } from '../../platform/redis-memory.ts';

const MB = 1_048_576;

test('used_memory and maxmemory are read from INFO memory; anything else is null', (t) => {
  const info =
    '# Memory\r\nused_memory:3020464\r\nused_memory_human:2.88M\r\nused_memory_rss:9000000\r\nmaxmemory:3003168\r\nmaxmemory_human:2.86M\r\nmaxmemory_policy:noeviction\r\n';
  t.deepEqual(parseMemoryInfo(info), { usedBytes: 3_020_464, maxBytes: 3_003_168 });
  t.deepEqual(parseMemoryInfo('used_memory:10\nmaxmemory:0\n'), { usedBytes: 10, maxBytes: 0 });
  t.is(parseMemoryInfo('used_memory:10\r\n'), null);
  t.is(parseMemoryInfo(''), null);
});

test('the high-water mark: the percentage of maxmemory, at least the workers’ headroom below it; none without maxmemory', (t) => {
  t.is(highWaterMark(0, 90), Infinity);
  t.is(highWaterMark(1000 * MB, 90), 900 * MB);
  t.is(highWaterMark(1000 * MB, 100), 1000 * MB);
  // A small maxmemory: the headroom wins over the percentage.
  t.is(highWaterMark(3 * MB, 90), 3 * MB - WORKER_HEADROOM_BYTES);
  t.is(highWaterMark(MB / 2, 90), 0);
});

test('room again: at the mark, or with the mark at maxmemory the headroom below it', (t) => {
  t.is(roomAgainBelow(1000 * MB, highWaterMark(1000 * MB, 90)), 900 * MB);
  t.is(roomAgainBelow(1000 * MB, highWaterMark(1000 * MB, 100)), 1000 * MB - WORKER_HEADROOM_BYTES);
});

// Real refusals of a full Redis (a reply, a script, BullMQ's add): test/unit/error-classes.test.ts.
test('OOM refusals are told apart from other errors by their code, as a reply or from inside a script', (t) => {
  t.true(isOomError(new ReplyError("OOM command not allowed when used memory > 'maxmemory'.")));
  t.true(isOomError(new ReplyError("OOM command not allowed when used memory > 'maxmemory'. script: 6c4c6de2, on @user_script:215.")));
  // Redis before 7.0: a script's refused call comes back as ERR, the refusal's code kept inside.
  t.true(
    isOomError(
      new ReplyError(
        "ERR Error running script (call to f_6c4c6de2): @user_script:215: @user_script: 215: -OOM command not allowed when used memory > 'maxmemory'.",
      ),
    ),
  );
  t.false(isOomError(new ReplyError('ERR Error running script (call to f_6c4c6de2): @user_script:1: Unknown Redis command called from Lua script')));
  t.false(isOomError(new ReplyError("READONLY You can't write against a read only replica.")));
  t.false(isOomError(new Error("OOM command not allowed when used memory > 'maxmemory'.")), 'the words, without a reply from Redis');
  t.false(isOomError(new Error('Connection is closed.')));
  t.false(isOomError(new Error('enqueue took longer than 2000 ms')));
  t.false(isOomError('OOM command not allowed'));
});

test('a batch job is estimated above what it was measured to take', (t) => {
  // Measured on Redis 7.0: 26.3 KB for one 20,000-character event, 2.3 KB for one of 1,000, 1.0 KB for one of 200.
  t.true(estimatedJobBytes(1, 20_000) > 26_300);
  t.true(estimatedJobBytes(1, 1000) > 2300);
  t.true(estimatedJobBytes(1, 200) > 1050);
  t.true(estimatedJobBytes(256, 256 * 200) > estimatedJobBytes(1, 256 * 200));
});
