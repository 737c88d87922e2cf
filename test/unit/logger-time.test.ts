import test from 'ava';
import { pino } from 'pino';
import { isoTimeOncePerMs } from '../../platform/logger.ts';

test("the cached timestamp is pino's isoTime: same text for the same millisecond, a new one when the clock moves", async (t) => {
  const time = isoTimeOncePerMs();
  const before = Date.now();
  const first = time();
  const m = /^,"time":"(.+)"$/.exec(first);
  t.truthy(m, first);
  const at = Date.parse(m![1]);
  t.true(at >= before && at <= Date.now());
  // pino's own function gives the same text for that millisecond.
  t.is(first.length, pino.stdTimeFunctions.isoTime().length);
  t.is(first, `,"time":"${new Date(at).toISOString()}"`);
  await new Promise((resolve) => setTimeout(resolve, 5));
  const later = time();
  t.not(later, first);
  t.true(Date.parse(/"time":"(.+)"/.exec(later)![1]) > at);
});
