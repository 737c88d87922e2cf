// The live view recorders' writes: one at a time for the timer; a flush waits for the write in
// flight and writes once more, so everything handed over before it is written; a flush fails
// when its write does, a timer's write only reports.
import test from 'ava';
import { singleWrite } from '../../gateway/live/single-write.ts';

/** A write whose calls resolve or reject when the test says. */
function controlled() {
  const started: { resolve(): void; reject(err: Error): void }[] = [];
  const write = () => new Promise<void>((resolve, reject) => started.push({ resolve, reject }));
  return { write, started };
}

test('a timer tick while a write runs starts none; a flush waits for it and writes once more', async (t) => {
  const { write, started } = controlled();
  const writes = singleWrite(write, () => {});
  void writes.tick();
  void writes.tick();
  t.is(started.length, 1);
  let flushed = false;
  const flush = writes.flush().then(() => (flushed = true));
  await Promise.resolve();
  t.is(started.length, 1, 'the flush waits for the write in flight');
  started[0].resolve();
  await new Promise((resolve) => setImmediate(resolve));
  t.is(started.length, 2, 'then writes what came since');
  t.false(flushed);
  started[1].resolve();
  await flush;
  t.true(flushed);
});

test('a failed write: a tick reports it, a flush rejects; a flush after a failed write in flight still writes', async (t) => {
  const { write, started } = controlled();
  const warned: unknown[] = [];
  const writes = singleWrite(write, (err) => warned.push(err));
  const tick = writes.tick();
  const flush = writes.flush();
  started[0].reject(new Error('full'));
  await tick;
  t.deepEqual(
    warned.map((e) => (e as Error).message),
    ['full'],
  );
  await new Promise((resolve) => setImmediate(resolve));
  t.is(started.length, 2);
  started[1].reject(new Error('still full'));
  await t.throwsAsync(flush, { message: 'still full' });
  t.is(warned.length, 1);
});
