// The pure parts of `intake import`: reading a line, its messageId, the done-lines watermark,
// the progress line.
import test from 'ava';
import { DoneLines } from '../../cli/import/checkpoint.ts';
import { byteLines, decodeLine, lineMessageId, parseLine } from '../../cli/import/lines.ts';
import { formatDuration, formatProgress } from '../../cli/import/progress.ts';

test('a line is an Identify call only when it is a JSON object with a non-empty userId', (t) => {
  t.deepEqual(parseLine('{"userId":"u-1","traits":{"a":1}}'), { kind: 'call', record: { userId: 'u-1', traits: { a: 1 } } });
  t.deepEqual(parseLine('   '), { kind: 'blank' });
  t.deepEqual(parseLine(''), { kind: 'blank' });
  t.deepEqual(parseLine('{"userId":"u-1"'), { kind: 'invalid', reason: 'not JSON' });
  t.deepEqual(parseLine('[{"userId":"u-1"}]'), { kind: 'invalid', reason: 'not a JSON object' });
  t.deepEqual(parseLine('null'), { kind: 'invalid', reason: 'not a JSON object' });
  t.deepEqual(parseLine('{"traits":{"a":1}}'), { kind: 'invalid', reason: 'no userId' });
  t.deepEqual(parseLine('{"userId":"  ","traits":{"a":1}}'), { kind: 'invalid', reason: 'no userId' });
  t.deepEqual(parseLine('{"userId":42,"traits":{"a":1}}'), { kind: 'invalid', reason: 'no userId' });
});

test('a line that is not UTF-8 is invalid, never sent with its bytes replaced', (t) => {
  t.is(decodeLine(Buffer.from('{"userId":"Zoë"}\r')), '{"userId":"Zoë"}', 'a CR before the LF is not part of the line');
  t.is(decodeLine(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d])), null);
  t.is(decodeLine(Buffer.from([0xc3])), null, 'a truncated sequence');
  t.deepEqual(parseLine(decodeLine(Buffer.from('{"userId":"u-\xfe"}', 'latin1'))), { kind: 'invalid', reason: 'not UTF-8' });
});

test('lines are split at LF in bytes, across chunk boundaries, a multi-byte character too', async (t) => {
  const text = Buffer.from('{"a":"東京"}\n\n{"b":1}\r\nlast');
  const chunks = async function* () {
    for (let i = 0; i < text.length; i += 3) yield text.subarray(i, i + 3);
  };
  const lines: string[] = [];
  for await (const line of byteLines(chunks())) lines.push(decodeLine(line)!);
  t.deepEqual(lines, ['{"a":"東京"}', '', '{"b":1}', 'last']);
});

test('a line keeps its messageId across runs; another file, line or text gets another', (t) => {
  const id = lineMessageId('f1', 7, '{"userId":"u"}');
  t.regex(id, /^import-[0-9a-f]{40}$/);
  t.is(lineMessageId('f1', 7, '{"userId":"u"}'), id);
  t.not(lineMessageId('f2', 7, '{"userId":"u"}'), id);
  t.not(lineMessageId('f1', 8, '{"userId":"u"}'), id);
  t.not(lineMessageId('f1', 7, '{"userId":"v"}'), id);
});

test('done lines: a watermark plus the few finished out of order', (t) => {
  const done = new DoneLines({ doneBelow: 1, doneAbove: [] });
  for (const n of [2, 3, 5]) done.add(n);
  t.deepEqual(done.snapshot(), { doneBelow: 1, doneAbove: [2, 3, 5] });
  done.add(1);
  t.deepEqual(done.snapshot(), { doneBelow: 4, doneAbove: [5] });
  t.true(done.has(3));
  t.false(done.has(4));
  t.true(done.has(5));
  t.is(done.size, 4);
  const resumed = new DoneLines(done.snapshot());
  t.false(resumed.has(4));
  resumed.add(4);
  t.deepEqual(resumed.snapshot(), { doneBelow: 6, doneAbove: [] });
});

test('progress: done/total, percentage, rate of this run and ETA', (t) => {
  t.is(formatProgress({ done: 3500, total: 10_000, doneAtStart: 0, elapsedMs: 5000 }, 20), '[#######-------------] 3,500/10,000 35% 700/s ETA 10s');
  t.is(formatProgress({ done: 6000, total: 10_000, doneAtStart: 5000, elapsedMs: 1000 }, 10), '[######----] 6,000/10,000 60% 1,000/s ETA 4s');
  t.is(formatProgress({ done: 0, total: 10, doneAtStart: 0, elapsedMs: 0 }, 4), '[----] 0/10 0% 0/s ETA ?');
  t.is(formatProgress({ done: 0, total: 0, doneAtStart: 0, elapsedMs: 10 }, 4), '[####] 0/0 100% 0/s ETA ?');
  t.is(formatDuration(59_000), '59s');
  t.is(formatDuration(61_000), '1m01s');
  t.is(formatDuration(3_660_000), '1h01m');
});

test('on a terminal the bar is redrawn in place; elsewhere plain lines', async (t) => {
  const { startProgress } = await import('../../cli/import/progress.ts');
  const written: string[] = [];
  const state = () => ({ done: 1, total: 2, doneAtStart: 0, elapsedMs: 1000 });
  startProgress({ isTTY: true, write: (s: string) => written.push(s) }, state, 1000).stop();
  t.deepEqual(written, ['\r[############------------] 1/2 50% 1/s ETA 1s\x1b[K', '\n']);
  written.length = 0;
  startProgress({ isTTY: false, write: (s: string) => written.push(s) }, state, 1000).stop();
  t.deepEqual(written, ['import: [############------------] 1/2 50% 1/s ETA 1s\n']);
});
