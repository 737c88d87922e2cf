import test from 'ava';
import { LineBatch } from '../../platform/logger.ts';

/** A writer that records what it is handed (the file writer's side of LineBatch). */
function recorder() {
  const chunks: string[] = [];
  let flushes = 0;
  return {
    chunks,
    flushes: () => flushes,
    write: (chunk: string) => (chunks.push(chunk), true),
    flush: (cb?: (err?: Error) => void) => (flushes++, cb?.()),
  };
}

const line = (i: number) => `{"i":${i},"msg":"${'x'.repeat(90)}"}\n`;

test('lines are handed over in chunks of at least the chunk size, in order, none lost or split', (t) => {
  const w = recorder();
  const batch = new LineBatch(w, 1000);
  for (let i = 0; i < 100; i++) batch.write(line(i));
  // ~100 characters a line: one chunk per ten lines, the rest still held.
  t.is(w.chunks.length, Math.floor((100 * line(0).length) / 1000) || 1);
  for (const c of w.chunks) t.true(c.length >= 1000 && c.endsWith('\n'));
  batch.flush();
  const text = w.chunks.join('');
  t.deepEqual(
    text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l).i),
    Array.from({ length: 100 }, (_, i) => i),
  );
});

test('flush hands over what is held and asks the writer to write it, calling back', (t) => {
  const w = recorder();
  const batch = new LineBatch(w, 1 << 20);
  batch.write(line(1));
  t.is(w.chunks.length, 0, 'held below the chunk size');
  let called = false;
  batch.flush(() => (called = true));
  t.deepEqual(w.chunks, [line(1)]);
  t.is(w.flushes(), 1);
  t.true(called);
  batch.flush();
  t.is(w.chunks.length, 1, 'nothing new to hand over');
});

test("held lines (npm start's start-up lines, until its summary is out) are handed over in order on release, not before, even on a flush", (t) => {
  const w = recorder();
  const batch = new LineBatch(w, 100);
  const release = batch.hold(60_000);
  for (let i = 0; i < 5; i++) batch.write(line(i));
  batch.flush();
  t.deepEqual(w.chunks, [], 'nothing while held, past the chunk size and through a flush');
  release();
  t.deepEqual(
    w.chunks
      .join('')
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l).i),
    [0, 1, 2, 3, 4],
  );
  batch.write(line(5));
  t.is(w.chunks.join('').split('\n').length - 1, 6, 'and written as they come after it');
});

test('a hold ends by itself after its bound: a start-up that never ends still shows its lines', async (t) => {
  const w = recorder();
  const batch = new LineBatch(w, 1 << 20);
  batch.hold(50);
  batch.write(line(1));
  batch.flush();
  t.deepEqual(w.chunks, []);
  await new Promise((resolve) => setTimeout(resolve, 120));
  t.deepEqual(w.chunks, [line(1)]);
});
