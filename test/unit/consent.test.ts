import test from 'ava';
import fc from 'fast-check';
import {
  addUtcMonths,
  addressAsOf,
  addressHistoryFrom,
  claimAddsNothing,
  laterClaim,
  addressFromTraits,
  changesSubscription,
  storedDecision,
  expiryOf,
  isGrantedAt,
  supersedes,
  toDecision,
  MAX_TIME_MS,
  type Decision,
} from '../../identify/consent.ts';
import { toPgText } from '../../platform/pg-text.ts';
import { decisionInput as input, storedDecisionOf } from '../helpers/consent-input.ts';

const decision = (status: Decision['status'], decidedAt: number): Decision => storedDecisionOf({ status, decidedAt });
const NOW = Date.UTC(2026, 0, 15);

test('decision time: consentedAt, else the call time', (t) => {
  t.is(toDecision(input({ consentedAt: 1000 }), 5000, NOW).decidedAt, 1000);
  t.is(toDecision(input(), 5000, NOW).decidedAt, 5000);
});

test('consentedAt more than 5 minutes ahead is replaced by the call time; exactly 5 minutes is kept', (t) => {
  t.is(toDecision(input({ consentedAt: NOW + 5 * 60_000 + 1 }), 7, NOW).decidedAt, 7);
  t.is(toDecision(input({ consentedAt: NOW + 5 * 60_000 }), 7, NOW).decidedAt, NOW + 5 * 60_000);
});

test('the newest decision wins', (t) => {
  t.true(supersedes(decision('withdrawn', 20), decision('granted', 10)));
  t.false(supersedes(decision('granted', 5), decision('withdrawn', 10)));
});

test('a stored unknown is replaced by any real decision, even an older one', (t) => {
  t.true(supersedes(decision('granted', 5), decision('unknown', 50)));
  t.true(supersedes(decision('withdrawn', 5), decision('unknown', 50)));
  t.false(supersedes(decision('unknown', 99), decision('unknown', 50)));
});

test('equal times: withdrawn wins over granted, never the reverse', (t) => {
  t.true(supersedes(decision('withdrawn', 10), decision('granted', 10)));
  t.false(supersedes(decision('granted', 10), decision('withdrawn', 10)));
});

test('unknown never replaces an existing decision, even a newer one', (t) => {
  t.false(supersedes(decision('unknown', 99), decision('granted', 10)));
  t.false(supersedes(decision('unknown', 99), decision('withdrawn', 10)));
  t.true(supersedes(decision('unknown', 99), null));
});

test('implied_transaction lapses 2 years after consentedAt; an earlier expiresAt wins', (t) => {
  const at = Date.UTC(2024, 1, 29);
  t.is(expiryOf('granted', 'implied_transaction', at, null), Date.UTC(2026, 1, 28));
  t.is(expiryOf('granted', 'implied_transaction', at, at + 1000), at + 1000);
  t.is(expiryOf('granted', 'implied_transaction', at, Date.UTC(2030, 0, 1)), Date.UTC(2026, 1, 28), 'a later expiresAt does not extend it');
});

test('implied_inquiry lapses 6 months after consentedAt; an earlier expiresAt wins', (t) => {
  const at = Date.UTC(2025, 7, 31);
  t.is(expiryOf('granted', 'implied_inquiry', at, null), Date.UTC(2026, 1, 28));
  t.is(expiryOf('granted', 'implied_inquiry', at, at + 5), at + 5);
});

test('implied_contract lapses at the expiresAt sent; express consent has no expiry unless sent', (t) => {
  t.is(expiryOf('granted', 'implied_contract', 1, 777), 777);
  t.is(expiryOf('granted', 'consent', 1, null), null);
  t.is(expiryOf('granted', null, 1, 50), 50);
});

test('granted and unexpired is granted; lapsed or withdrawn is not', (t) => {
  t.true(isGrantedAt({ ...decision('granted', 1), expiresAt: NOW + 1 }, NOW));
  t.false(isGrantedAt({ ...decision('granted', 1), expiresAt: NOW }, NOW));
  t.false(isGrantedAt(decision('withdrawn', 1), NOW));
  t.false(isGrantedAt(null, NOW));
});

test('addresses: email trimmed and lowercased, phone trimmed, non-strings and blanks are none', (t) => {
  t.is(addressFromTraits('email', { email: '  Ann@Example.COM ' }), 'ann@example.com');
  t.is(addressFromTraits('sms', { phone: ' +47 123 ' }), '+47 123');
  t.is(addressFromTraits('email', { email: '   ' }), null);
  t.is(addressFromTraits('email', { email: 42 }), null);
  t.is(addressFromTraits('sms', { email: 'a@b.c' }), null);
});

test('address as of a time: the latest claim at or before it; none before the first', (t) => {
  const claims = [
    { value: 'a@x.io', at: 10 },
    { value: 'b@x.io', at: 30 },
    { value: 'c@x.io', at: 30 },
  ];
  t.is(addressAsOf('email', claims, 20), 'a@x.io');
  t.is(addressAsOf('email', claims, 30), 'c@x.io', 'equal times: later arrival');
  t.is(addressAsOf('email', claims, 5), null);
});

test('addUtcMonths clamps the day', (t) => {
  t.is(addUtcMonths(Date.UTC(2025, 0, 31), 1), Date.UTC(2025, 1, 28));
  t.is(addUtcMonths(Date.UTC(2025, 4, 15, 12), 6), Date.UTC(2025, 10, 15, 12));
});

test('times beyond what a date holds are kept inside it (bigint columns, date arithmetic)', (t) => {
  const input = { channel: 'email', purpose: 'marketing', status: 'granted', basis: 'implied_inquiry', source: 'api', proofRef: null } as const;
  const far = toDecision({ ...input, consentedAt: -1e20, expiresAt: 1e20 }, 1000, 2000);
  t.is(far.decidedAt, -MAX_TIME_MS);
  t.true(Number.isFinite(far.expiresAt!));
  t.is(toDecision({ ...input, basis: 'consent', consentedAt: null, expiresAt: 1e20 }, 1000, 2000).expiresAt, MAX_TIME_MS);
});

test('a claim claimAddsNothing leaves out changes no addressAsOf answer, at any time (random histories)', (t) => {
  const claim = fc.record({ value: fc.constantFrom('a@x.io', 'b@x.io', ''), at: fc.integer({ min: 0, max: 20 }) });
  let skipped = 0;
  fc.assert(
    fc.property(fc.array(claim, { maxLength: 8 }), claim, (earlier, next) => {
      const history = earlier.map((c, order) => ({ ...c, order }));
      const latest = history.reduce<(typeof history)[number] | undefined>((best, c) => laterClaim(best, c), undefined);
      if (!claimAddsNothing(latest, next.value, next.at)) return;
      skipped++;
      const withIt = [...history, { ...next, order: history.length }];
      for (let time = -1; time <= 21; time++) t.is(addressAsOf('email', withIt, time), addressAsOf('email', history, time));
    }),
    { numRuns: 2000 },
  );
  t.true(skipped > 100, 'the property was exercised');
});

test('laterClaim: the later time wins; on equal times the later arrival', (t) => {
  const a = { value: 'a', at: 5, order: 1 };
  const b = { value: 'b', at: 5, order: 2 };
  const c = { value: 'c', at: 4, order: 3 };
  t.is(laterClaim(a, b), b);
  t.is(laterClaim(b, a), b);
  t.is(laterClaim(a, c), a);
  t.is(laterClaim(undefined, c), c);
  t.false(claimAddsNothing(undefined, 'a', 9), 'an empty history needs the claim');
  t.false(claimAddsNothing(a, 'a', 4), 'an earlier claim of the same value is history the latest does not answer');
  t.false(claimAddsNothing(a, 'b', 9));
  t.true(claimAddsNothing(a, 'a', 5));
});

test('the address history answers from ADDRESS_HISTORY_DAYS ago on: forever without it', (t) => {
  t.is(addressHistoryFrom(NOW, null), null);
  t.is(addressHistoryFrom(NOW, 30), NOW - 30 * 86_400_000);
  const claims = [{ value: 'a@x.io', at: 10 }];
  t.is(addressAsOf('email', claims, 20, null), 'a@x.io');
  t.is(addressAsOf('email', claims, 20, 20), 'a@x.io', 'a decision at the bound reads the history');
  t.is(addressAsOf('email', claims, 19, 20), null, 'one before it finds none, though the claim is there');
});

test('a decision changes the subscription when there was none, or its status or expiry differs', (t) => {
  const granted = toDecision(input(), 1000, 2000);
  t.true(changesSubscription(granted, null));
  t.false(changesSubscription({ ...granted, decidedAt: 1500, source: 'import' }, granted), 'a newer decision of the same state');
  t.true(changesSubscription({ ...granted, status: 'withdrawn' }, granted));
  t.true(changesSubscription({ ...granted, expiresAt: 9000 }, granted));
});

test('a stored decision row reads back as the decision written: texts unescaped, int8 times as numbers', (t) => {
  const source = 'form\u0000 \\ x';
  const row = {
    channel: 'sms',
    purpose: 'marketing',
    status: 'granted',
    basis: null,
    source: toPgText(source),
    proofRef: toPgText('p\\1'),
    decidedAt: '1700000000000',
    expiresAt: 1700000009999n,
  };
  t.deepEqual(storedDecision(row), {
    channel: 'sms',
    purpose: 'marketing',
    status: 'granted',
    basis: null,
    source,
    proofRef: 'p\\1',
    decidedAt: 1700000000000,
    expiresAt: 1700000009999,
  });
  t.is(storedDecision({ ...row, proofRef: null, expiresAt: null }).expiresAt, null);
});
