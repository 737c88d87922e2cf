// Rules with one home each: the future bound (Identify's timestamp, consent's consentedAt) and
// the organization features.
import test from 'ava';
import { FEATURE, FEATURES, hasFeature } from '../../environments/features.ts';
import { isTooFarAhead, MAX_AHEAD_MS } from '../../events/future-bound.ts';
import { toDecision } from '../../identify/consent.ts';
import { checkIdentify } from '../../identify/validation.ts';

const NOW = Date.parse('2026-01-01T00:00:00Z');

test('the future bound: up to 5 minutes ahead is fine, a millisecond more is not', (t) => {
  t.is(MAX_AHEAD_MS, 300_000);
  t.false(isTooFarAhead(NOW + MAX_AHEAD_MS, NOW));
  t.true(isTooFarAhead(NOW + MAX_AHEAD_MS + 1, NOW));
});

test('Identify and consent apply the same bound', (t) => {
  const call = (timestamp: string) => ({ type: 'identify', messageId: 'm', userId: 'u', traits: { plan: 'pro' }, timestamp });
  const at = (ms: number) => new Date(ms).toISOString();
  t.true(checkIdentify(call(at(NOW + MAX_AHEAD_MS)), NOW).ok);
  t.deepEqual(checkIdentify(call(at(NOW + MAX_AHEAD_MS + 1)), NOW), { ok: false, tooFarAhead: true });
  const decision = (consentedAt: number) =>
    toDecision(
      {
        channel: 'email',
        address: 'a@b.c',
        purpose: 'marketing',
        status: 'granted',
        basis: 'consent',
        source: 'api',
        consentedAt,
        proofRef: null,
        expiresAt: null,
      } as never,
      NOW - 1000,
      NOW,
    );
  t.is(decision(NOW + MAX_AHEAD_MS).decidedAt, NOW + MAX_AHEAD_MS);
  t.is(decision(NOW + MAX_AHEAD_MS + 1).decidedAt, NOW - 1000, 'beyond the bound: the call time');
});

test('features: the one list, and membership', (t) => {
  t.deepEqual([...FEATURES], ['join-by-email', 'attribute-trigger']);
  t.true(hasFeature(['attribute-trigger'], FEATURE.attributeTrigger));
  t.false(hasFeature(['join-by-email'], FEATURE.attributeTrigger));
});
