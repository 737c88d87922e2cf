import test from 'ava';
import type { HealthRules, PartitionHealth } from '../../platform/partition-health.ts';
import { HEALTH_RULES, inRotation, nextInTurn, probeDelayMs, probeDue, probed, probeStarted, removed } from '../../platform/partition-health.ts';

const RULES: HealthRules = { probeBaseMs: 100, probeCapMs: 2000, stableMs: 10_000 };

/** A partition taken out at `now` whose probes then fail `failedProbes` times, each as soon as due. */
function outAfter(failedProbes: number, now = 0): PartitionHealth {
  let h = removed(inRotation(), now, RULES);
  for (let i = 0; i < failedProbes; i++) h = probed(probeStarted(h), false, h.probeAt, RULES);
  return h;
}

test('the defaults: a first probe soon after leaving, at most one every 2 s', (t) => {
  t.deepEqual(HEALTH_RULES, RULES);
});

test('a partition starts in the rotation, and a batch failing on it takes it out at once', (t) => {
  const h = inRotation();
  t.is(h.rotation, 'in');
  const out = removed(h, 5000, RULES);
  t.like(out, { rotation: 'out', failures: 1, outAt: 5000, probeAt: 5100, removals: 1, returns: 0 });
  t.is(h.rotation, 'in', 'the earlier state is left as it was');
});

test('batches that fail once it is out change nothing: they were sent before it left', (t) => {
  const out = removed(inRotation(), 0, RULES);
  t.is(removed(out, 50, RULES), out);
  const probing = probeStarted(out);
  t.is(removed(probing, 150, RULES), probing);
});

test('a probe is due only while out, once its wait is over, one at a time', (t) => {
  const out = removed(inRotation(), 0, RULES);
  t.false(probeDue(out, 99));
  t.true(probeDue(out, 100));
  const probing = probeStarted(out);
  t.is(probing.rotation, 'probing');
  t.false(probeDue(probing, 10_000), 'not while a probe is under way');
  t.is(probeStarted(probing), probing);
  t.false(probeDue(inRotation(), 10_000), 'never for a partition in the rotation');
  t.is(probeStarted(inRotation()).rotation, 'in');
});

test('failed probes double the wait, up to the cap', (t) => {
  t.deepEqual(
    Array.from({ length: 8 }, (_, i) => probeDelayMs(i + 1, RULES)),
    [100, 200, 400, 800, 1600, 2000, 2000, 2000],
  );
  let h = removed(inRotation(), 0, RULES);
  const waits: number[] = [];
  for (let i = 0; i < 7; i++) {
    const now = h.probeAt + 30; // the probe ends 30 ms after it started
    const next = probed(probeStarted(h), false, now, RULES);
    waits.push(next.probeAt - now);
    t.is(next.rotation, 'out');
    h = next;
  }
  t.deepEqual(waits, [200, 400, 800, 1600, 2000, 2000, 2000]);
  t.is(h.failures, 8);
  t.is(h.removals, 1, 'a failed probe is not a removal');
});

test('a confirmed probe brings the partition back, and is counted', (t) => {
  const h = probed(probeStarted(outAfter(3)), true, 4000, RULES);
  t.like(h, { rotation: 'in', returnedAt: 4000, removals: 1, returns: 1 });
  t.is(probed(h, true, 4100, RULES), h, 'an outcome with no probe under way changes nothing');
  t.is(probed(outAfter(1), true, 4100, RULES).rotation, 'out', 'nor one for a partition waiting for its probe');
});

test('a partition that leaves again soon after returning resumes its backoff; one that stayed in for stableMs starts over', (t) => {
  const back = probed(probeStarted(outAfter(3)), true, 4000, RULES);
  t.is(back.failures, 4);
  const soon = removed(back, 4000 + RULES.stableMs - 1, RULES);
  t.is(soon.failures, 5);
  t.is(soon.probeAt - soon.outAt, 1600);
  const later = removed(back, 4000 + RULES.stableMs, RULES);
  t.is(later.failures, 1);
  t.is(later.probeAt - later.outAt, 100);
  t.is(later.removals, 2);
});

test('batches take the partitions in the rotation in turn, skipping those out; none in: -1', (t) => {
  const up = inRotation();
  const down = removed(up, 0, RULES);
  const probing = probeStarted(down);
  t.deepEqual(
    [0, 1, 2, 3, 4].map((turn) => nextInTurn([up, up, up], turn)),
    [0, 1, 2, 0, 1],
  );
  t.deepEqual(
    [0, 1, 2].map((turn) => nextInTurn([down, up, probing], turn)),
    [1, 1, 1],
  );
  t.deepEqual(
    [0, 1, 2].map((turn) => nextInTurn([up, down, up], turn)),
    [0, 2, 2],
  );
  t.is(nextInTurn([down, probing, down], 0), -1);
  t.is(nextInTurn([], 0), -1);
});
