// What the storage maintenance removes of the address history.
import test from 'ava';
import fc from 'fast-check';
import { addressAsOf } from '../../identify/consent.ts';
import { historyRemovalHorizon, HISTORY_REMOVAL_MARGIN_MS, removableClaims } from '../../identify/history-retention.ts';

const NOW = Date.parse('2026-06-01T00:00:00Z');

test('the removal keeps an hour more than ADDRESS_HISTORY_DAYS, and nothing without it', (t) => {
  t.is(historyRemovalHorizon(NOW, null), null);
  t.is(historyRemovalHorizon(NOW, 30), NOW - 30 * 86_400_000 - HISTORY_REMOVAL_MARGIN_MS);
});

test('removableClaims: per channel, what is at or before the horizon except the address as of it', (t) => {
  const c = (channel: 'email' | 'sms', at: number, order: number) => ({ channel, value: `${channel}${order}`, at, order });
  const history = [c('email', 5, 1), c('email', 10, 2), c('sms', 3, 3), c('email', 10, 4), c('email', 30, 5), c('email', 7, 6), c('sms', 40, 7)];
  t.deepEqual(
    removableClaims(history, 20).map((x) => x.order),
    [1, 2, 6],
    'email 4 is the latest at 10 (arrived after 2); sms 3 is its channel’s only claim then',
  );
  t.deepEqual(removableClaims(history, 4), [], 'nothing is removable with one claim per channel at or before the horizon');
  t.deepEqual(
    removableClaims(history, 100).map((x) => x.order),
    [1, 2, 3, 4, 6],
  );
  t.deepEqual(
    removableClaims(history, 10).map((x) => x.order),
    [1, 2, 6],
    'a claim at the horizon is the address as of it',
  );
});

test('removing removableClaims changes no addressAsOf answer at or after the horizon (random histories)', (t) => {
  const claim = fc.record({
    channel: fc.constantFrom('email' as const, 'sms' as const),
    value: fc.constantFrom('a@x.io', 'b@x.io', 'c@x.io', ''),
    at: fc.integer({ min: 0, max: 30 }),
  });
  let removedSome = 0;
  fc.assert(
    fc.property(fc.array(claim, { maxLength: 12 }), fc.integer({ min: -1, max: 31 }), (raw, horizon) => {
      const history = raw.map((c, order) => ({ ...c, order }));
      const removable = new Set(removableClaims(history, horizon));
      const kept = history.filter((c) => !removable.has(c));
      if (removable.size) removedSome++;
      for (const channel of ['email', 'sms'] as const) {
        const before = history.filter((c) => c.channel === channel);
        const after = kept.filter((c) => c.channel === channel);
        for (let time = horizon; time <= 32; time++) t.is(addressAsOf(channel, after, time), addressAsOf(channel, before, time));
        // Nothing more could go: each kept claim at or before the horizon is its channel's answer there.
        t.true(after.filter((c) => c.at <= horizon).length <= 1);
      }
    }),
    { numRuns: 2000 },
  );
  t.true(removedSome > 500, 'the property was exercised');
});
