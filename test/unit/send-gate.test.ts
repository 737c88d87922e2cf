import test from 'ava';
import type { Decision } from '../../identify/consent.ts';
import { gateSend, sendAddress } from '../../journeys/send-gate.ts';
import { storedDecisionOf } from '../helpers/consent-input.ts';

const decision = (status: Decision['status'], expiresAt: number | null = null): Decision => storedDecisionOf({ status, expiresAt });

test('the address comes from traits.email / traits.phone, normalized as consent is keyed', (t) => {
  t.is(sendAddress('email', { email: ' A@B.com ' }), 'a@b.com');
  t.is(sendAddress('sms', { phone: ' +1 555 ' }), '+1 555');
  t.is(sendAddress('email', { phone: '+1' }), null);
  t.is(sendAddress('email', { email: 42 }), null);
  t.is(sendAddress('email', null), null);
});

test('only granted and unexpired consent lets a message through', (t) => {
  const fields = { email: 'a@b.com' };
  t.deepEqual(gateSend(fields, 'a@b.com', decision('granted'), 10), { status: 'queued', address: 'a@b.com' });
  t.deepEqual(gateSend(fields, 'a@b.com', decision('granted', 11), 10), { status: 'queued', address: 'a@b.com' });
  t.deepEqual(gateSend(fields, 'a@b.com', decision('granted', 10), 10), { status: 'skipped', address: 'a@b.com', reason: 'consent_expired' });
  t.deepEqual(gateSend(fields, 'a@b.com', decision('withdrawn'), 10), { status: 'skipped', address: 'a@b.com', reason: 'consent_withdrawn' });
  t.deepEqual(gateSend(fields, 'a@b.com', decision('unknown'), 10), { status: 'skipped', address: 'a@b.com', reason: 'consent_unknown' });
  t.deepEqual(gateSend(fields, 'a@b.com', null, 10), { status: 'skipped', address: 'a@b.com', reason: 'no_consent' });
  t.deepEqual(gateSend({}, null, null, 10), { status: 'skipped', address: null, reason: 'no_address' });
  t.deepEqual(gateSend(null, null, null, 10), { status: 'skipped', address: null, reason: 'no_profile' });
});
