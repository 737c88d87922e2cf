// The rule that decides whether an Identify batch tries the profile cache (identify/cache-gate.ts):
// tried while most recent tries succeeded, then one batch in PROBE_EVERY until they do again.
import test from 'ava';
import { CacheGate, PROBE_EVERY } from '../../identify/cache-gate.ts';

/** How many of the next `n` batches the gate lets try. */
function tries(gate: CacheGate, n: number): number {
  let count = 0;
  for (let i = 0; i < n; i++) if (gate.shouldTry()) count++;
  return count;
}

test('a new gate tries every batch', (t) => {
  t.is(tries(new CacheGate(), 100), 100);
});

test('a failure now and then among successes keeps every batch trying', (t) => {
  const gate = new CacheGate();
  for (let i = 0; i < 200; i++) {
    t.true(gate.shouldTry(), `batch ${i}`);
    gate.record(i % 4 !== 0);
  }
});

/** Fails every try until the gate turns a batch away (that batch is the first of a period); returns the failures. */
function close(gate: CacheGate): number {
  let failures = 0;
  while (gate.shouldTry()) {
    gate.record(false);
    failures++;
  }
  return failures;
}

test('once most tries fail, only one batch in PROBE_EVERY tries', (t) => {
  const gate = new CacheGate();
  const failures = close(gate);
  t.true(failures >= 2 && failures <= 5, `closed after ${failures} failures`);
  t.is(tries(gate, PROBE_EVERY * 10 - 1), 10, 'a probe ends each of ten periods, the rest go straight to the locked path');
});

test('probes that fail keep it closed; a probe that succeeds opens it again', (t) => {
  const gate = new CacheGate();
  close(gate);
  t.is(tries(gate, PROBE_EVERY - 2), 0);
  for (let period = 0; period < 5; period++) {
    t.true(gate.shouldTry(), 'the probe');
    gate.record(false);
    t.is(tries(gate, PROBE_EVERY - 1), 0);
  }
  t.true(gate.shouldTry());
  gate.record(true);
  t.is(tries(gate, 50), 50);
});
