import test from 'ava';
import { createUploadWatch, sweepIntervalMs } from '../../gateway/upload-watch.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('the check interval: 250 ms, or a quarter of a shorter grace', (t) => {
  t.is(sweepIntervalMs({ graceMs: 5000, minBytesPerSecond: 1 }), 250);
  t.is(sweepIntervalMs({ graceMs: 200, minBytesPerSecond: 1 }), 50);
  t.is(sweepIntervalMs({ graceMs: 1, minBytesPerSecond: 1 }), 10);
});

test('stalled uploads are cut once each, never before the grace; unwatched ones and ones keeping pace are not', async (t) => {
  const pace = { graceMs: 200, minBytesPerSecond: 1000 };
  let sweeps = 0;
  const watch = createUploadWatch(pace, () => sweeps++);
  t.teardown(() => watch.close());
  const started = performance.now();
  const cutAt: number[][] = Array.from({ length: 30 }, () => []);
  const uploads = cutAt.map((times) => watch.watch(() => times.push(performance.now() - started)));
  // Every third finishes at once (unwatched, twice: harmless); one more keeps pace at 2,000 bytes/s.
  for (let i = 0; i < uploads.length; i += 3) (watch.unwatch(uploads[i]), watch.unwatch(uploads[i]));
  const steady = uploads[1];
  const feed = setInterval(() => (steady.received += 20), 10);
  t.teardown(() => clearInterval(feed));
  t.is(watch.active(), 20);

  await sleep(800);
  clearInterval(feed);
  for (let i = 0; i < uploads.length; i++) {
    if (i % 3 === 0 || i === 1) t.deepEqual(cutAt[i], [], `upload ${i} not cut`);
    else {
      t.is(cutAt[i].length, 1, `upload ${i} cut once`);
      // Never before the grace; within two checks (50 ms apart) after it, plus a loaded machine's timer delays.
      t.true(cutAt[i][0] >= pace.graceMs && cutAt[i][0] < pace.graceMs + 2 * 50 + 300, `upload ${i} cut at ${Math.round(cutAt[i][0])} ms`);
    }
  }
  t.is(watch.cuts(), 19);
  t.is(watch.active(), 1, 'the steady one is still watched');
  t.true(sweeps > 5);
  watch.unwatch(steady);
  t.is(watch.active(), 0);
});
