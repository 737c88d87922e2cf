import test from 'ava';
import { backoffMs } from '../../platform/backoff.ts';

test('doubles from the base per failure, up to the cap', (t) => {
  t.deepEqual(
    Array.from({ length: 8 }, (_, i) => backoffMs(i, 100, 5000)),
    [100, 200, 400, 800, 1600, 3200, 5000, 5000],
  );
  t.is(backoffMs(1000, 100, 5000), 5000);
  t.is(backoffMs(-1, 100, 5000), 100);
});
