import test from 'ava';
import { createGroupBatch } from '../../platform/group-batch.ts';

/** A run whose batches finish only when the test says so. */
function controlled() {
  const batches: { items: number[]; finish: (outcomes?: (number | Error)[]) => void; fail: (err: Error) => void }[] = [];
  const run = (items: number[]) =>
    new Promise<(number | Error)[]>((resolve, reject) => {
      batches.push({ items, finish: (outcomes) => resolve(outcomes ?? items.map((i) => i * 10)), fail: reject });
    });
  return { batches, run };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));

test('items of one turn go together; while the in-flight bound is reached later items wait and then go as one batch', async (t) => {
  const { batches, run } = controlled();
  const group = createGroupBatch(run, { maxBatch: 100, maxInFlight: 1 });
  const first = [1, 2, 3].map((i) => group.add(i));
  await turn();
  t.deepEqual(
    batches.map((b) => b.items),
    [[1, 2, 3]],
  );
  const later = [4, 5].map((i) => group.add(i));
  await turn();
  await turn();
  t.is(batches.length, 1, 'nothing starts while one batch is in flight');
  const more = group.add(6);
  batches[0].finish();
  t.deepEqual(await Promise.all(first), [10, 20, 30]);
  await turn();
  t.deepEqual(batches[1].items, [4, 5, 6]);
  batches[1].finish();
  t.deepEqual(await Promise.all([...later, more]), [40, 50, 60]);
});

test('maxBatch bounds a batch; a per-item Error rejects that item alone; a failed run rejects its whole batch', async (t) => {
  const { batches, run } = controlled();
  const group = createGroupBatch(run, { maxBatch: 2, maxInFlight: 2 });
  const adds = [1, 2, 3, 4, 5].map((i) => group.add(i));
  await turn();
  t.deepEqual(
    batches.map((b) => b.items),
    [
      [1, 2],
      [3, 4],
    ],
  );
  batches[0].finish([10, new Error('refused')]);
  batches[1].fail(new Error('connection lost'));
  const settled = await Promise.allSettled(adds.slice(0, 4));
  t.deepEqual(
    settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as Error).message)),
    [10, 'refused', 'connection lost', 'connection lost'],
  );
  await turn();
  t.deepEqual(batches[2].items, [5]);
  batches[2].finish();
  t.is(await adds[4], 50);
});

test('items of one key never run in two batches at once and keep their order; other keys go on', async (t) => {
  const batches: { items: string[]; finish: () => void }[] = [];
  const run = (items: string[]) => new Promise<string[]>((resolve) => batches.push({ items, finish: () => resolve(items) }));
  const group = createGroupBatch(run, { maxBatch: 3, maxInFlight: 3, keyOf: (item: string) => item[0] });
  const adds = ['a1', 'b1', 'c1', 'a2', 'd1', 'e1'].map((i) => group.add(i));
  await turn();
  t.deepEqual(
    batches.map((b) => b.items),
    [
      ['a1', 'b1', 'c1'],
      ['d1', 'e1'],
    ],
    'a2 waits for the batch holding a1; d1 and e1 go on',
  );
  const later = ['a3', 'f1'].map((i) => group.add(i));
  await turn();
  t.deepEqual(batches[2].items, ['f1'], 'a2 and a3 still wait, in order');
  batches[0].finish();
  await turn();
  t.deepEqual(batches[3].items, ['a2', 'a3']);
  for (const b of batches.slice(1)) b.finish();
  t.deepEqual(await Promise.all([...adds, ...later]), ['a1', 'b1', 'c1', 'a2', 'd1', 'e1', 'a3', 'f1']);
});

test('with overlapMs a batch starts beside running ones only once the latest of them has run so long', async (t) => {
  const { batches, run } = controlled();
  const group = createGroupBatch(run, { maxBatch: 100, maxInFlight: 3, overlapMs: 60 });
  const first = group.add(1);
  await turn();
  const started = performance.now();
  const second = group.add(2);
  await turn();
  await turn();
  t.is(batches.length, 1, 'the second waits while the first is young');
  while (batches.length < 2) await new Promise((resolve) => setTimeout(resolve, 5));
  t.true(performance.now() - started >= 50, 'it started once the first had run ~60 ms');
  t.deepEqual(batches[1].items, [2], 'beside the first, which is still running');
  batches[1].finish();
  t.is(await second, 20);
  // Only the old first batch runs now: a new item goes beside it at once.
  const third = group.add(3);
  await turn();
  t.deepEqual(batches[2]?.items, [3]);
  batches[0].finish();
  batches[2].finish();
  t.deepEqual(await Promise.all([first, third]), [10, 30]);
});

test('with overlapMs, what waited behind a batch that finished quickly goes at once', async (t) => {
  const { batches, run } = controlled();
  const group = createGroupBatch(run, { maxBatch: 100, maxInFlight: 3, overlapMs: 1000 });
  const first = group.add(1);
  await turn();
  const second = group.add(2);
  await turn();
  t.is(batches.length, 1);
  const finished = performance.now();
  batches[0].finish();
  t.is(await first, 10);
  await turn();
  t.deepEqual(batches[1]?.items, [2]);
  t.true(performance.now() - finished < 500);
  batches[1].finish();
  t.is(await second, 20);
});

test('an item to run alone goes in a batch of its own, in all slots but one at most; the other items keep a slot', async (t) => {
  const { batches, run } = controlled();
  // Items over 100 are the slow ones.
  const group = createGroupBatch(run, { maxBatch: 10, maxInFlight: 3, alone: (item: number) => item > 100 });
  const adds = [1, 101, 2, 102, 103, 3].map((i) => group.add(i));
  await turn();
  t.deepEqual(
    batches.map((b) => b.items),
    [[1, 2, 3], [101], [102]],
    'the small items together, each slow one alone, the third slow one waiting for a slot it may take',
  );
  const late = [4, 5].map((i) => group.add(i));
  batches[0].finish();
  await turn();
  t.deepEqual(batches[3].items, [4, 5], 'the slot left to the other items takes them, not the waiting slow one');
  batches[1].finish();
  await turn();
  t.deepEqual(batches[4].items, [103], 'a slow batch ended: the waiting slow one takes its slot');
  for (const b of batches.slice(2)) b.finish();
  t.deepEqual(await Promise.all([...adds, ...late]), [10, 1010, 20, 1020, 1030, 30, 40, 50]);
});

test('a slow item keeps its place among its key: a later item of that key waits for it', async (t) => {
  const batches: { items: string[]; finish: () => void }[] = [];
  const run = (items: string[]) => new Promise<string[]>((resolve) => batches.push({ items, finish: () => resolve(items) }));
  const group = createGroupBatch(run, { maxBatch: 10, maxInFlight: 3, keyOf: (item: string) => item[0], alone: (item: string) => item.endsWith('!') });
  const adds = ['b1', 'a1!', 'a2', 'c1'].map((i) => group.add(i));
  await turn();
  t.deepEqual(
    batches.map((b) => b.items),
    [['b1', 'c1'], ['a1!']],
  );
  batches[1].finish();
  await turn();
  t.deepEqual(batches[2].items, ['a2']);
  for (const b of batches) b.finish();
  t.deepEqual(await Promise.all(adds), ['b1', 'a1!', 'a2', 'c1']);
});
