import test from 'ava';
import { allowedUploadMs, uploadOverdue } from '../../gateway/upload-pace.ts';

const pace = { graceMs: 5000, minBytesPerSecond: 16_384 };

test('a stalled body is overdue once the grace is spent, whatever its first bytes', (t) => {
  t.false(uploadOverdue(4999, 1, pace));
  t.false(uploadOverdue(5000, 0, pace));
  t.true(uploadOverdue(5001, 0, pace));
  t.true(uploadOverdue(5100, 1, pace));
  t.true(uploadOverdue(60_000, 100, pace));
});

test('each minBytesPerSecond received earns one more second', (t) => {
  t.is(allowedUploadMs(16_384, pace), 6000);
  t.is(allowedUploadMs(1_048_576, pace), 5000 + 64_000);
  t.false(uploadOverdue(5900, 16_384, pace));
  t.true(uploadOverdue(6100, 16_384, pace));
});

test('a body arriving at the minimum rate is never overdue; a trickle below it is, after the grace', (t) => {
  for (const seconds of [1, 10, 100]) t.false(uploadOverdue(seconds * 1000, seconds * 16_384, pace), `${seconds} s at the rate`);
  // Ten bytes a second: about the grace, then cut.
  t.false(uploadOverdue(5000, 50, pace));
  t.true(uploadOverdue(5100, 51, pace));
});
