// The profile cache behind Identify's one-round-trip path (identify/profile-cache.ts): a
// batch is served from it only when every call's profile is held and no call needs what it
// does not keep; it keeps what committed batches wrote, within its size.
import test from 'ava';
import { toIdentifyCall, type Plan } from '../../identify/identify-plan.ts';
import { fitsCachedWrite } from '../../identify/identify-write.ts';
import { ProfileCache } from '../../identify/profile-cache.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import type { IdentifyInput } from '../../identify/validation.ts';

const ENV = '00000000-0000-4000-8000-000000000001';

function call(userId: string, traits: Record<string, unknown> = {}, extra: Partial<IdentifyInput> = {}, features: string[] = []) {
  return toIdentifyCall({ id: ENV, features }, identifyInput(userId, traits, extra), 1000);
}

function written(users: [string, string][], fieldsOf: (id: string) => string = () => '{"a":1}', moved: Plan['moved'] = []): Plan {
  const ids = [...new Set(users.map(([, id]) => id))];
  return {
    verdicts: [],
    changed: [],
    profiles: ids.map((id) => ({
      id,
      envId: ENV,
      fields: fieldsOf(id),
      times: '{"a":1}',
      updatedAt: 1,
      email: null,
      createdAt: 1,
      claims: null,
      latest: {},
      isNew: false,
    })),
    moved,
    users: [],
    userProfiles: users.map(([u, id]) => [`${ENV}:${u}`, id]),
    claims: [],
    decisions: [],
    outbox: [],
    consentKeys: new Map(),
  };
}

test('a batch is served only when every user is held: its snapshot has their profiles and the versions they were written at', (t) => {
  const cache = new ProfileCache(1_000_000);
  cache.remember(
    written([
      ['u1', 'p1'],
      ['u2', 'p2'],
    ]),
    '77',
  );
  const hit = cache.snapshotFor([call('u1'), call('u2'), call('u1')]);
  t.deepEqual(
    [...hit!.snapshot.users],
    [
      [`${ENV}:u1`, 'p1'],
      [`${ENV}:u2`, 'p2'],
    ],
  );
  t.deepEqual(
    [...hit!.versions],
    [
      ['p1', '77'],
      ['p2', '77'],
    ],
  );
  t.is(hit!.snapshot.profiles.get('p1')!.fields, '{"a":1}');
  t.is(hit!.snapshot.priors.size, 0);
  t.is(cache.snapshotFor([call('u1'), call('u3')]), null, 'one unknown user: the locked path');
});

test('consent decisions and a joinable email in a joining organization are never served from the cache', (t) => {
  const cache = new ProfileCache(1_000_000);
  cache.remember(written([['u1', 'p1']]), '5');
  const grant = {
    channel: 'email',
    status: 'granted',
    purpose: 'marketing',
    basis: 'consent',
    source: 'api',
    consentedAt: null,
    proofRef: null,
    expiresAt: null,
  } as const;
  t.is(cache.snapshotFor([call('u1', {}, { consent: [grant] })]), null);
  t.is(cache.snapshotFor([call('u1', { email: 'a@example.com' }, {}, ['join-by-email'])]), null);
  t.not(cache.snapshotFor([call('u1', { email: 'a@example.com' })]), null, 'the same email where profiles do not join');
});

/** What one profile with one user of `written` costs the cache. */
function oneProfileBytes(): number {
  const probe = new ProfileCache(1_000_000);
  probe.remember(written([['u0', 'p0']]), '1');
  return probe.bytes;
}

test('a profile joined away is forgotten; a later write replaces the version; the heap budget evicts the least recently written', (t) => {
  const one = oneProfileBytes();
  // Room for four profiles of one user (one of them may have two).
  const cache = new ProfileCache(Math.floor(4.5 * one));
  cache.remember(
    written([
      ['u1', 'p1'],
      ['u2', 'p2'],
    ]),
    '1',
  );
  cache.remember(written([['u1', 'p2']], undefined, [{ from: 'p1', to: 'p2' }]), '2');
  t.deepEqual([...cache.snapshotFor([call('u1'), call('u2')])!.versions], [['p2', '2']]);
  cache.remember(
    written([
      ['u3', 'p3'],
      ['u4', 'p4'],
      ['u5', 'p5'],
    ]),
    '3',
  );
  t.is(cache.size, 4);
  cache.remember(written([['u6', 'p6']]), '4');
  t.is(cache.size, 4);
  t.true(cache.bytes <= 4.5 * one);
  t.is(cache.snapshotFor([call('u1')]), null, 'p2, the least recently written, went first, with both its users');
  t.is(cache.snapshotFor([call('u2')]), null);
  t.not(cache.snapshotFor([call('u6')]), null);
  // A profile too large to be worth keeping is not kept.
  cache.remember(
    written([['u7', 'p7']], () => 'x'.repeat(140_000)),
    '5',
  );
  t.is(cache.snapshotFor([call('u7')]), null);
});

test('what the cache counts follows its users: a user moved between profiles, rewritten profiles, all forgotten is 0', (t) => {
  const cache = new ProfileCache(1_000_000);
  cache.remember(
    written([
      ['u1', 'p1'],
      ['u2', 'p2'],
    ]),
    '1',
  );
  const two = cache.bytes;
  // u2 joins p1 (no profile moved: p2 keeps its other users, here none).
  cache.remember(written([['u2', 'p1']]), '2');
  t.is(cache.snapshotFor([call('u2')])!.snapshot.users.get(`${ENV}:u2`), 'p1');
  t.is(cache.bytes, two, 'the user moved with its cost');
  // Rewriting a profile keeps its users; a longer text costs more.
  cache.remember(
    written([['u1', 'p1']], () => '{"a":"a longer text than before, by far"}'),
    '3',
  );
  t.not(cache.snapshotFor([call('u1'), call('u2')]), null, 'both users of p1 still served');
  t.true(cache.bytes > two);
  cache.forget('p1');
  cache.forget('p2');
  t.is(cache.size, 0);
  t.is(cache.bytes, 0);
  t.is(cache.snapshotFor([call('u2')]), null);
});

test('users are evicted with their profile: a stream of new users never grows the cache past its budget', (t) => {
  const one = oneProfileBytes();
  const cache = new ProfileCache(100 * one);
  for (let i = 0; i < 5000; i++) cache.remember(written([[`user-${i}`, `profile-${i}`]]), String(i));
  t.true(cache.bytes <= 100 * one);
  t.true(cache.size >= 90 && cache.size <= 100, `${cache.size} profiles`);
  t.is(cache.snapshotFor([call('user-0')]), null);
  t.not(cache.snapshotFor([call('user-4999')]), null);
});

test('the one-statement write takes a plan of updates only; one that creates, joins or decides goes the locked path', (t) => {
  const updates = written([['u1', 'p1']]);
  t.true(fitsCachedWrite(updates));
  t.false(fitsCachedWrite({ ...updates, profiles: updates.profiles.map((p) => ({ ...p, isNew: true })) }));
  t.false(fitsCachedWrite({ ...updates, moved: [{ from: 'p0', to: 'p1' }] }));
  t.false(fitsCachedWrite({ ...updates, users: [{ envId: ENV, userKey: 'u1', profileId: 'p1' }] }));
});
