import test from 'ava';
import { toDecision } from '../../identify/consent.ts';
import { profileFieldsChanged, subscriptionChanged } from '../../events/service-events.ts';
import { decisionInput } from '../helpers/consent-input.ts';

const subject = { userId: 'u1', profileId: 'p1', messageId: 'm1' };

test('a profile change is an event only with the attribute-trigger feature and a changed trait; it carries the changed traits alone', (t) => {
  const fields = { plan: 'pro', seats: 3 };
  t.deepEqual(JSON.parse(profileFieldsChanged(true, subject, 1000, ['plan'], fields)!), { ...subject, at: 1000, changed: { plan: 'pro' } });
  t.is(profileFieldsChanged(false, subject, 1000, ['plan'], fields), null);
  t.is(profileFieldsChanged(true, subject, 1000, [], fields), null);
});

test('a subscription change carries the decision and its address', (t) => {
  const d = toDecision(decisionInput({ status: 'withdrawn' }), 1000, 2000);
  t.deepEqual(JSON.parse(subscriptionChanged(subject, d, 'a@b.io')), {
    ...subject,
    channel: 'email',
    purpose: 'marketing',
    address: 'a@b.io',
    status: 'withdrawn',
    decidedAt: 1000,
    expiresAt: null,
  });
});
