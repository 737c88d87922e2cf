import { Writable } from 'node:stream';
import test from 'ava';
import { pino } from 'pino';
import { errorKind, throttleWarnings } from '../../platform/warn-throttle.ts';
import { eventually, sleep } from '../helpers/eventually.ts';

function captured() {
  const records: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n')) if (line) records.push(JSON.parse(line));
      done();
    },
  });
  return { log: pino({ level: 'info' }, stream), records };
}

const OOM = (line: number) => new Error(`OOM command not allowed when used memory > 'maxmemory'. script: ab${line}cd, on @user_script:${line}.`);

test('repeats of one error are one line at once, then one line per interval with the count', async (t) => {
  const { log, records } = captured();
  const warnings = throttleWarnings(log, 200);
  t.teardown(() => warnings.close());
  for (let i = 0; i < 1000; i++) warnings.warn('events worker', OOM(i % 3 ? 123 : 215));
  t.is(records.length, 1);
  t.like(records[0], { msg: 'events worker', err: OOM(215).message });
  t.true(await eventually(async () => records.length >= 2), 'the interval ended');
  t.is(records.length, 2);
  t.like(records[1], { msg: 'events worker: the same error 999 more times', repeats: 999, intervalMs: 200 });
  // Each source is its own kind.
  warnings.warn('dead-letter worker', OOM(1));
  t.is(records.length, 3);
});

test('a kind quiet for a whole interval is forgotten: its next occurrence is logged at once', async (t) => {
  const { log, records } = captured();
  const warnings = throttleWarnings(log, 100);
  t.teardown(() => warnings.close());
  warnings.warn('w', new Error('boom'));
  // Two intervals and more: the first tick finds it quiet and forgets it.
  await sleep(600);
  warnings.warn('w', new Error('boom'));
  t.is(records.length, 2);
  t.is(records[1].msg, 'w');
});

test('distinct messages are bounded too, and close() reports what was counted', (t) => {
  const { log, records } = captured();
  const warnings = throttleWarnings(log, 60_000);
  for (let i = 0; i < 10_000; i++)
    warnings.warn('w', new Error(`failure of kind ${'abcdefghijklmnopqrstuvwxyz'[i % 26]}${String.fromCharCode(65 + (i % 57))}`));
  t.true(records.length <= 51, `${records.length} lines`);
  warnings.close();
  t.true(records.length <= 102);
  t.is(
    records.filter((r) => typeof r.repeats === 'number').reduce((n, r) => n + (r.repeats as number), 0) + records.filter((r) => r.repeats === undefined).length,
    10_000,
    'every occurrence is in a line or a count',
  );
});

test('the kind of an error leaves out script hashes, lines and numbers', (t) => {
  t.is(errorKind(OOM(215).message), errorKind(OOM(123).message));
  t.is(errorKind('Missing lock for job 17. moveToFinished'), errorKind('Missing lock for job 42. moveToFinished'));
  t.not(errorKind('Connection is closed.'), errorKind(OOM(1).message));
});
