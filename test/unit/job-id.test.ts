import test from 'ava';
import { jobIdFor } from '../../platform/queues.ts';

test('job ids: deterministic, per environment, never a colon, distinct for IDs that differ only in an unpaired surrogate', (t) => {
  const env = '3f1c2a4e-1234-4567-89ab-0123456789ab';
  t.is(jobIdFor(env, 'm-1'), jobIdFor(env, 'm-1'));
  t.not(jobIdFor(env, 'm-1'), jobIdFor('4f1c2a4e-1234-4567-89ab-0123456789ab', 'm-1'));
  t.not(jobIdFor(env, 'a\ud800'), jobIdFor(env, 'a\udc00'));
  t.not(jobIdFor(env, 'a\ud800'), jobIdFor(env, 'a\ufffd'));
  t.not(jobIdFor(env, 'x\0y'), jobIdFor(env, 'x\\0y'));
  for (const id of ['m', 'a:b', '\0', '😀']) t.regex(jobIdFor(env, id), /^e[A-Za-z0-9_-]{32}$/);
});
