import test from 'ava';
import { planBatch, toIdentifyCall, type Snapshot } from '../../identify/identify-plan.ts';
import type { IdentifyInput } from '../../identify/validation.ts';
import { decisionInput } from '../helpers/consent-input.ts';
import { identifyInput } from '../helpers/identify-input.ts';

const ENV = '00000000-0000-0000-0000-00000000000e';
const T = Date.parse('2024-05-01T10:00:00Z');

function call(userId: string, traits: Record<string, unknown>, extra: Partial<IdentifyInput> = {}, features: string[] = ['attribute-trigger']) {
  return toIdentifyCall({ id: ENV, features }, identifyInput(userId, traits, { timestampMs: T, ...extra }), T);
}

const empty = (): Snapshot => ({ users: new Map(), profiles: new Map(), priors: new Map(), decisions: new Map() });
let ids = 0;
const newId = () => `p${++ids}`;

test('a batch applies its calls in arrival order: one profile per new user, later equal-time values win, one outbox row per changing call', (t) => {
  const plan = planBatch([call('a', { x: 1 }), call('b', { x: 'b' }), call('a', { x: 2, y: true }), call('a', { x: 2 })], empty(), T, newId);
  t.deepEqual(plan.verdicts, ['applied', 'applied', 'applied', 'applied']);
  t.is(plan.profiles.length, 2);
  t.true(plan.profiles.every((p) => p.isNew));
  t.deepEqual(JSON.parse(plan.profiles[0].fields), { x: 2, y: true });
  t.deepEqual(
    plan.users.map((u) => u.userKey),
    ['a', 'b'],
  );
  t.is(plan.outbox.length, 3, 'the last call changes nothing');
});

test('a messageId seen earlier in the batch: the same call is a duplicate, anything else a conflict; neither writes', (t) => {
  const first = call('a', { x: 1 }, { messageId: 'm' });
  const plan = planBatch(
    [first, call('a', { x: 1 }, { messageId: 'm' }), call('a', { x: 9 }, { messageId: 'm' }), call('b', { x: 1 }, { messageId: 'm' })],
    empty(),
    T,
    newId,
  );
  t.deepEqual(plan.verdicts, ['applied', 'duplicate', 'conflict', 'conflict']);
  t.deepEqual(JSON.parse(plan.profiles[0].fields), { x: 1 });
  t.is(plan.users.length, 1);
});

test("join by email inside one batch: the second user joins the first one's new profile", (t) => {
  const features = ['join-by-email'];
  const plan = planBatch(
    [call('a', { email: 'x@example.com', n: 1 }, {}, features), call('b', { email: 'X@example.com ', m: 2 }, {}, features)],
    empty(),
    T,
    newId,
  );
  t.is(plan.profiles.length, 1);
  t.deepEqual(
    plan.users.map((u) => u.profileId),
    [plan.profiles[0].id, plan.profiles[0].id],
  );
  t.deepEqual(JSON.parse(plan.profiles[0].fields), { email: 'X@example.com ', n: 1, m: 2 });
});

test('consent: an address sent by an earlier call of the batch is the one a later consent-only call decides on', (t) => {
  const grant = decisionInput();
  const snapshot = { ...empty(), decisions: null };
  const plan = planBatch([call('a', { email: 'A@Example.com' }), call('a', {}, { consent: [grant] })], snapshot, T, newId);
  t.deepEqual(
    [...plan.consentKeys.values()].map((k) => k.address),
    ['a@example.com'],
  );
  t.is(plan.decisions.length, 1);
  t.is(plan.decisions[0].decision.status, 'granted');
  t.deepEqual(
    plan.outbox.map((o) => o.kind),
    ['profile_fields_changed', 'subscription_changed'],
  );
});

test('without the attribute-trigger feature a trait change writes no outbox row; a consent change still writes its own', (t) => {
  const grant = decisionInput();
  const snapshot = { ...empty(), decisions: null };
  const plan = planBatch([call('a', { email: 'A@Example.com' }, {}, []), call('a', { n: 1 }, { consent: [grant] }, [])], snapshot, T, newId);
  t.deepEqual(JSON.parse(plan.profiles[0].fields), { email: 'A@Example.com', n: 1 });
  t.deepEqual(
    plan.outbox.map((o) => o.kind),
    ['subscription_changed'],
  );
});

test('an address the profile already has as of the call is not claimed again; a changed or older one is', (t) => {
  const snapshot = empty();
  snapshot.users.set(`${ENV}:u`, 'p-u');
  const latest = { email: { channel: 'email' as const, value: 'a@example.com', at: T - 10, order: 7 } };
  snapshot.profiles.set('p-u', {
    id: 'p-u',
    envId: ENV,
    fields: '{"email":"a@example.com"}',
    times: `{"email":${T - 10}}`,
    updatedAt: T - 10,
    email: 'a@example.com',
    createdAt: 1,
    claims: null,
    latest,
  });
  const at = (ms: number) => ({ timestampMs: ms });
  const plan = planBatch(
    [
      call('u', { email: 'A@example.com' }, at(T)),
      call('u', { email: 'b@example.com' }, at(T + 1)),
      call('u', { email: 'b@example.com' }, at(T + 2)),
      call('u', { email: 'a@example.com' }, at(T - 20)),
    ],
    snapshot,
    T,
    newId,
  );
  t.deepEqual(
    plan.claims.map((c) => [c.value, c.at]),
    [
      ['b@example.com', T + 1],
      ['a@example.com', T - 20],
    ],
  );
  t.deepEqual(plan.profiles[0].latest.email, { channel: 'email', value: 'b@example.com', at: T + 1, order: 2 ** 52 });
});

test('consent with a history bound: a decision dated before it reads no address from the history; its own call’s address still applies', (t) => {
  const snapshot = (): Snapshot => {
    const s = { ...empty(), decisions: null };
    s.users.set(`${ENV}:u`, 'p-u');
    const claims = [{ channel: 'email' as const, value: 'old@example.com', at: T - 100, order: 1 }];
    s.profiles.set('p-u', {
      id: 'p-u',
      envId: ENV,
      fields: '{}',
      times: '{}',
      updatedAt: T - 100,
      email: null,
      createdAt: 1,
      claims,
      latest: { email: claims[0] },
    });
    return s;
  };
  const from = T - 50;
  const decided = (at: number) => call('u', {}, { consent: [decisionInput({ consentedAt: at })] });
  const addresses = (plan: ReturnType<typeof planBatch>) => plan.decisions.map((d) => d.address);
  t.deepEqual(addresses(planBatch([decided(T - 60)], snapshot(), T, newId)), ['old@example.com'], 'no bound: the address as of then');
  t.deepEqual(addresses(planBatch([decided(T - 60)], snapshot(), T, newId, from)), [], 'before the bound: skipped');
  t.deepEqual(addresses(planBatch([decided(from)], snapshot(), T, newId, from)), ['old@example.com'], 'at the bound: the history answers');
  const ownAddress = call('u', { email: 'New@example.com' }, { consent: [decisionInput({ consentedAt: T - 60 })] });
  t.deepEqual(addresses(planBatch([ownAddress], snapshot(), T, newId, from)), ['new@example.com']);
});
