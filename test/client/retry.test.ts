// The client's retry rules (pure): what is temporary, and how long it waits.
import test from 'ava';
import { backoffDelay, DEFAULT_RETRY, isTemporaryStatus, parseRetryAfter } from '../../clients/typescript/src/index.ts';
import { isTemporaryCode } from '../../clients/typescript/src/retry.ts';

test('temporary: 429 and every 5xx; never 400, 401, 403, 404, 409, 413', (t) => {
  for (const s of [429, 500, 502, 503, 504, 599]) t.true(isTemporaryStatus(s), String(s));
  for (const s of [200, 202, 400, 401, 403, 404, 408, 409, 413, 431]) t.false(isTemporaryStatus(s), String(s));
});

test('temporary: connections refused, reset or cut, and timed-out attempts; not an unknown host', (t) => {
  for (const c of ['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'TIMEOUT', 'EAI_AGAIN']) t.true(isTemporaryCode(c), c);
  for (const c of ['ENOTFOUND', 'ERR_INVALID_URL', undefined]) t.false(isTemporaryCode(c), String(c));
});

test('full jitter: uniform below a ceiling that doubles from the base up to the maximum', (t) => {
  const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000 };
  t.is(
    backoffDelay(policy, 1, () => 0),
    0,
  );
  t.is(
    backoffDelay(policy, 1, () => 0.999),
    99,
  );
  t.is(
    backoffDelay(policy, 3, () => 0.5),
    200,
  );
  t.is(
    backoffDelay(policy, 10, () => 0.999),
    999,
    'capped at the maximum',
  );
  const spread = new Set(Array.from({ length: 50 }, () => backoffDelay(policy, 4, Math.random)));
  t.true(spread.size > 10, 'jittered');
});

test('Retry-After is a floor, in seconds or as an HTTP date', (t) => {
  const policy = { ...DEFAULT_RETRY, baseDelayMs: 100, maxDelayMs: 1000 };
  t.is(parseRetryAfter('1'), 1000);
  t.is(parseRetryAfter(' 3 '), 3000);
  t.is(parseRetryAfter(new Date(10_000).toUTCString(), 4_000), 6000);
  t.is(parseRetryAfter('soon'), undefined);
  t.is(parseRetryAfter(undefined), undefined);
  t.is(
    backoffDelay(policy, 1, () => 0.5, 1000),
    1000,
  );
  t.is(
    backoffDelay(policy, 5, () => 0.99, 500),
    990,
    'the backoff when it is longer',
  );
});
