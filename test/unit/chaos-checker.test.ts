// The chaos checker's properties on small hand-made histories: each rule holds where it should
// and reports where it should not (chaos/checker/).
import test from 'ava';
import { answersInRequestOrder } from '../../chaos/checker/connection-order.ts';
import { ERASURE_EXIT_BOUND_MS, ERASURE_BOUND_MS, erasureRemovedPerson, looksLikeConstraintViolation } from '../../chaos/checker/erasure-complete.ts';
import { exportListsEveryEvent } from '../../chaos/checker/export-complete.ts';
import { identifyApplied } from '../../chaos/checker/identify-applied.ts';
import { check } from '../../chaos/checker/index.ts';
import { messageHashOf, messageKeyOf, userKeyOf } from '../../chaos/checker/keys.ts';
import { minimalHistory } from '../../chaos/checker/minimal-history.ts';
import { DAY_MS, type RunFacts, type Snapshot } from '../../chaos/checker/model.ts';
import { idTokens, makeContext } from '../../chaos/checker/context.ts';
import { refusedStoredNothing } from '../../chaos/checker/refused-stored-nothing.ts';
import { REPLICA_REUSE_BOUND_MS, replicaUsedAgain } from '../../chaos/checker/replica-reused.ts';
import { RECOVERY_WINDOW_MS, serverErrorsOnlyInFaults } from '../../chaos/checker/server-errors.ts';
import { trackStoredExactlyOnce } from '../../chaos/checker/track-stored.ts';
import type { BadOp, CommandOp, Entry, Fault, FaultKind, History, IdentifyOp, Org, Outcome, PipelineOp, TrackOp } from '../../chaos/history.ts';

/** Noon UTC: a day's boundaries are far from every time of these histories unless a test moves the clock. */
const T0 = Date.UTC(2026, 11, 5, 12, 0, 0);
const FACTS: RunFacts = { retentionDays: 1, joinByEmail: { a: true, b: false } };

class Builder {
  private id = 0;
  readonly entries: Entry[] = [];

  private base(at: number, ms = 5, org: Org = 'a', offsetMs = 0) {
    return { type: 'op' as const, id: ++this.id, client: 'c0', conn: 'gateway-1/s1', org, invokedAt: T0 + at, completedAt: T0 + at + ms, offsetMs };
  }

  track(
    at: number,
    messageId: string,
    userId: string | null,
    outcome: Outcome = { status: 202, body: JSON.stringify({ message_id: messageId, status: 'accepted' }) },
    more: Partial<TrackOp> = {},
  ) {
    const op: TrackOp = { ...this.base(at, 5, more.org, more.offsetMs), kind: 'track', messageId, userId, body: '{}', outcome, ...more };
    this.entries.push(op);
    return op;
  }

  identify(
    at: number,
    messageId: string,
    userId: string,
    email: string | null,
    outcome: Outcome = { status: 200, body: JSON.stringify({ success: true, messageId, duplicate: false }) },
    more: Partial<IdentifyOp> = {},
  ) {
    const op: IdentifyOp = { ...this.base(at, 5, more.org), kind: 'identify', messageId, userId, email, body: '{}', outcome, ...more };
    this.entries.push(op);
    return op;
  }

  command(
    kind: CommandOp['kind'],
    at: number,
    ms: number,
    userId: string,
    result: { exitCode?: number; stdout?: string; stderr?: string } = {},
    more: Partial<CommandOp> = {},
  ) {
    const op: CommandOp = {
      ...this.base(at, ms, more.org),
      kind,
      userId,
      suppress: false,
      purpose: 'operator',
      exitCode: result.exitCode ?? 0,
      stdout: result.stdout ?? (kind === 'forget' ? JSON.stringify({ joinedUserIds: [] }) : '{}'),
      stderr: result.stderr ?? '',
      ...more,
    };
    this.entries.push(op);
    return op;
  }

  bad(at: number, messageId: string, userId: string, outcome: Outcome = { status: 400, body: '{"error":"Required"}' }) {
    const op: BadOp = { ...this.base(at), kind: 'bad', api: 'track', what: 'no event', messageId, userId, body: '{}', outcome };
    this.entries.push(op);
    return op;
  }

  pipeline(at: number, variant: string, requests: PipelineOp['requests'], answers: [number, string][], closedByServer = true) {
    const op: PipelineOp = {
      ...this.base(at, 20),
      kind: 'pipeline',
      variant,
      requests,
      answers: answers.map(([status, body]) => ({ status, headers: {}, body })),
      trailing: '',
      closedByServer,
      error: null,
    };
    this.entries.push(op);
    return op;
  }

  fault(kind: FaultKind, at: number, ms: number) {
    const f: Fault = { type: 'fault', id: ++this.id, kind, target: 'x', startedAt: T0 + at, endedAt: T0 + at + ms };
    this.entries.push(f);
    return f;
  }

  history(): History {
    return { seed: 1, startedAt: T0, entries: this.entries };
  }
}

function snapshot(parts: Partial<Snapshot> = {}, at = 60_000, offsetMs = 0): Snapshot {
  return {
    takenAt: T0 + at,
    offsetMs,
    events: [],
    profileUsers: [],
    profiles: [],
    identifyMessages: [],
    journeyRuns: [],
    orphanMessageIds: [],
    addressClaims: [],
    redis: [],
    drained: true,
    ...parts,
  };
}

const row = (messageId: string, userId: string | null, at: number, org: Org = 'a') => ({ org, messageId, userId, receivedAt: T0 + at });
const run = <T>(property: (ctx: ReturnType<typeof makeContext>) => T, b: Builder, s: Snapshot) => property(makeContext(b.history(), s, FACTS));

// ---- property 1 ------------------------------------------------------------------------------

test('track: a 202 with its row holds; without one it is reported', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  b.track(2_000, 'm2', 'u-1');
  const found = run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 1_002)] }));
  t.is(found.length, 1);
  t.is(found[0].subject, 'messageId m2');
  t.regex(found[0].message, /stored nowhere/);
});

test('track: a padded userId is stored as sent; a row nobody sent is reported', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', ' u-1 ');
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', ' u-1 ', 1_002)] })), []);
  const phantom = run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', ' u-1 ', 1_002), row('m1', 'u-1', 9_000)] }));
  t.true(phantom.some((v) => /no request/.test(v.message)));
});

test('track: a 503 may or may not be stored; a resend inside the window stored twice is reported', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1', { status: 503, body: '{"error":"Event storage is unavailable"}' });
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot()), []);
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 1_001)] })), []);
  b.track(3_000, 'm1', 'u-1');
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 1_001)] })), [], 'the resend is the same event');
  const twice = run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 1_001), row('m1', 'u-1', 3_001)] }));
  t.is(twice.length, 1);
  t.regex(twice[0].message, /stored twice/);
});

test('track: a resend of the same body stored first stands for the original; another send of the messageId does not', (t) => {
  const b = new Builder();
  const original = b.track(1_000, 'm1', 'u-1');
  b.track(4_000, 'm1', 'u-1', undefined, { resendOf: original.id });
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 4_001)] })), [], 'the original was the duplicate');

  const other = new Builder();
  other.track(1_000, 'm1', 'u-1');
  other.track(4_000, 'm1', 'u-1');
  const found = run(trackStoredExactlyOnce, other, snapshot({ events: [row('m1', 'u-1', 4_001)] }));
  t.is(found.length, 1, 'another body under the same messageId is not a copy of the first');
  t.regex(found[0].message, /stored nowhere/);
});

test('track: an erasure that may have come after the call excuses a missing row; one certainly before it does not', (t) => {
  const after = new Builder();
  after.track(1_000, 'm1', ' u-1');
  after.command('forget', 500, 1_000, 'u-1');
  t.deepEqual(run(trackStoredExactlyOnce, after, snapshot()), [], 'the erasure overlapped the call');

  const joined = new Builder();
  joined.track(1_000, 'm1', 'u-2');
  joined.command('forget', 5_000, 1_000, 'u-1', { stdout: JSON.stringify({ joinedUserIds: ['u-2'] }) });
  t.deepEqual(run(trackStoredExactlyOnce, joined, snapshot()), [], 'u-2 was joined to the erased profile');

  const before = new Builder();
  before.command('forget', 0, 500, 'u-1');
  before.track(1_000, 'm1', 'u-1');
  t.is(run(trackStoredExactlyOnce, before, snapshot()).length, 1, 'a call after a plain erasure is new data');
});

test('track: a resend after an erasure is new data and must be stored', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  b.command('forget', 2_000, 500, 'u-1');
  b.track(5_000, 'm1', 'u-1');
  const found = run(trackStoredExactlyOnce, b, snapshot());
  t.is(found.length, 1);
  t.regex(found[0].message, /after its person was erased/);
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ events: [row('m1', 'u-1', 5_001)] })), []);
});

test('track: a repeat of another person’s messageId is that event: gone with it when that person is erased', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  // Another user's call with the same messageId: the same event, already stored.
  b.track(2_000, 'm1', 'u-2');
  b.command('forget', 3_000, 500, 'u-1');
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot()), []);
  // Without the erasure, the first copy must still be there.
  const kept = new Builder();
  kept.track(1_000, 'm1', 'u-1');
  kept.track(2_000, 'm1', 'u-2');
  t.is(run(trackStoredExactlyOnce, kept, snapshot()).length, 2);
});

test('track: a suppression in force when the call may have arrived excuses it, until an unsuppress exited 0', (t) => {
  const b = new Builder();
  b.command('suppress', 0, 500, 'u-1');
  b.track(1_000, 'm1', 'u-1');
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot()), []);
  b.command('unsuppress', 2_000, 500, 'u-1');
  b.track(3_000, 'm2', 'u-1');
  const found = run(trackStoredExactlyOnce, b, snapshot());
  t.deepEqual(
    found.map((v) => v.subject),
    ['messageId m2'],
  );
});

test('track: a resend after the retention window needs a row of its own; one inside it does not', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  // Two days on the fake clock: the first copy's day has passed the one-day retention.
  b.track(30_000, 'm1', 'u-1', undefined, { offsetMs: 2 * DAY_MS });
  const s = (events: Snapshot['events']) => snapshot({ events }, 60_000, 2 * DAY_MS);
  const found = run(trackStoredExactlyOnce, b, s([]));
  t.is(found.length, 1);
  t.regex(found[0].message, /after the retention window/);
  t.deepEqual(run(trackStoredExactlyOnce, b, s([row('m1', 'u-1', 2 * DAY_MS + 30_001)])), []);
  t.is(run(trackStoredExactlyOnce, b, s([row('m1', 'u-1', 1_001)])).length, 1, 'the old copy (not yet dropped) does not stand for the new event');

  const inside = new Builder();
  inside.track(1_000, 'm1', 'u-1');
  inside.track(30_000, 'm1', 'u-1', undefined, { offsetMs: 6 * 3_600_000 });
  t.deepEqual(run(trackStoredExactlyOnce, inside, snapshot({ events: [row('m1', 'u-1', 1_001)] }, 60_000, 6 * 3_600_000)), []);
});

test('track: a copy whose day has passed the retention by the check may be gone', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({}, 60_000, 2 * DAY_MS)), []);
});

// ---- property 2 ------------------------------------------------------------------------------

test('identify: applied means a profile user and a recorded messageId', (t) => {
  const b = new Builder();
  b.identify(1_000, 'i1', ' u-1 ', 'p0@x');
  const applied = snapshot({
    profileUsers: [{ org: 'a', userId: 'u-1', profileId: 'p' }],
    identifyMessages: [{ org: 'a', messageKey: messageKeyOf('i1'), userKey: userKeyOf('u-1') }],
  });
  t.deepEqual(run(identifyApplied, b, applied), []);
  const missing = run(identifyApplied, b, snapshot({ profileUsers: [{ org: 'a', userId: 'u-1', profileId: 'p' }] }));
  t.is(missing.length, 1);
  t.regex(missing[0].details!.join(), /identify_messages/);
});

test('identify: a duplicate answer asks nothing; an erasure after it excuses it; profiles of b never join', (t) => {
  const b = new Builder();
  b.identify(1_000, 'i1', 'u-1', null, { status: 200, body: JSON.stringify({ success: true, messageId: 'i1', duplicate: true }) });
  b.identify(2_000, 'i2', 'u-2', 'p0@x');
  b.command('forget', 3_000, 500, 'u-2');
  t.deepEqual(run(identifyApplied, b, snapshot()), []);
  const joined = run(
    identifyApplied,
    new Builder(),
    snapshot({
      profileUsers: [
        { org: 'b', userId: 'u-1', profileId: 'p' },
        { org: 'b', userId: 'u-2', profileId: 'p' },
      ],
    }),
  );
  t.is(joined.length, 1);
  t.regex(joined[0].message, /without join-by-email/);
});

// ---- property 3 ------------------------------------------------------------------------------

test('erasure: an event of the person received before it and still stored is reported, whatever its spelling', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', '  u-1');
  b.track(9_000, 'm2', 'u-1');
  b.command('forget', 5_000, 1_000, 'u-1');
  const found = run(erasureRemovedPerson, b, snapshot({ events: [row('m1', '  u-1', 1_001), row('m2', 'u-1', 9_001)] }));
  t.is(found.length, 1);
  t.deepEqual(found[0].details, [`events: messageId "m1", userId "  u-1", received_at ${new Date(T0 + 1_001).toISOString()}`]);
});

test('erasure: joined users, Identify records, journey runs, addresses and Redis keys of the person are reported', (t) => {
  const b = new Builder();
  b.identify(1_000, 'i1', 'u-1', 'p0@x');
  b.identify(2_000, 'i2', 'j-7', 'p0@x');
  b.track(2_500, 'm1', 'u-1');
  b.command('forget', 5_000, 1_000, 'u-1', { stdout: JSON.stringify({ joinedUserIds: [] }) });
  const s = snapshot({
    profileUsers: [{ org: 'a', userId: 'j-7', profileId: 'p' }],
    identifyMessages: [{ org: 'a', messageKey: messageKeyOf('i1'), userKey: userKeyOf('u-1') }],
    journeyRuns: [{ org: 'a', userId: 'u-1', triggerKey: 'e:m1' }],
    profiles: [{ org: 'a', id: 'p', email: 'p0@x' }],
    redis: [{ key: 'live:identify:env', org: 'a', strings: ['live:identify:env', 'u', 'j-7 '] }],
  });
  const [v] = run(erasureRemovedPerson, b, s);
  const details = v.details!.join('\n');
  for (const part of ['profile_users: "j-7"', 'identify_messages', 'journey_runs', 'profiles: p', 'Redis key live:identify:env holds "j-7"'])
    t.true(details.includes(part), part);
});

test('erasure: a key of the other org’s environment holds its own person of the same user ID, not the erased one', (t) => {
  const b = new Builder();
  b.identify(1_000, 'i1', 'u-1', 'p0@x');
  b.command('forget', 5_000, 1_000, 'u-1', { stdout: JSON.stringify({ joinedUserIds: [] }) });
  const refused = (org: 'a' | 'b' | null) => ({
    key: `live:refused:env-${org}`,
    org,
    strings: [`live:refused:env-${org}`, '{"b":"{\\"userId\\":\\"u-1\\"}"}', 'u-1'],
  });
  t.deepEqual(run(erasureRemovedPerson, b, snapshot({ redis: [refused('b')] })), []);
  for (const org of ['a', null] as const) {
    const [v] = run(erasureRemovedPerson, b, snapshot({ redis: [refused(org)] }));
    t.deepEqual(v?.details, [`Redis key live:refused:env-${org} holds "u-1"`], `a key of ${org ?? 'no one environment'}`);
  }
});

test('erasure: data sent after it started is allowed to stay', (t) => {
  const b = new Builder();
  b.command('forget', 1_000, 1_000, 'u-1');
  b.identify(1_500, 'i1', 'u-1', 'p0@x');
  b.track(3_000, 'm1', 'u-1');
  const s = snapshot({
    events: [row('m1', 'u-1', 3_001)],
    profileUsers: [{ org: 'a', userId: 'u-1', profileId: 'p' }],
    identifyMessages: [{ org: 'a', messageKey: messageKeyOf('i1'), userKey: userKeyOf('u-1') }],
    redis: [{ key: 'k', org: null, strings: ['{"userId":"u-1"}', 'u-1'] }],
  });
  t.deepEqual(run(erasureRemovedPerson, b, s), []);
});

test('erasure: a failure needs a PostgreSQL fault, and never a constraint violation', (t) => {
  const fk = 'intake: error: Aktualisieren oder Löschen in Tabelle »profiles« verletzt Fremdschlüssel-Constraint »profile_users_profile_id_fkey«';
  const alone = new Builder();
  alone.command('forget', 1_000, 500, 'u-1', { exitCode: 1, stderr: 'intake: cannot reach PostgreSQL' });
  t.regex(run(erasureRemovedPerson, alone, snapshot())[0].message, /no PostgreSQL fault/);

  const faulted = new Builder();
  faulted.fault('pg-freeze', 900, 3_000);
  faulted.command('forget', 1_000, 500, 'u-1', { exitCode: 1, stderr: 'intake: cannot reach PostgreSQL' });
  t.deepEqual(run(erasureRemovedPerson, faulted, snapshot()), []);
  faulted.command('forget', 1_200, 500, 'u-2', { exitCode: 1, stderr: fk });
  t.regex(run(erasureRemovedPerson, faulted, snapshot())[0].message, /constraint/);
  t.true(looksLikeConstraintViolation(fk));
  t.true(looksLikeConstraintViolation('duplicate key value violates unique constraint "profiles_pkey"'));
  t.false(looksLikeConstraintViolation('intake: cannot reach PostgreSQL at 127.0.0.1:5432'));
});

/** The checker's findings on one erasure (`purpose`) that ran `eraseMs` beside a control command that ran `controlMs`. */
function besideControl(purpose: 'operator' | 'join-erasure', controlMs: number, eraseMs: number) {
  const b = new Builder();
  const control = b.command('forget', 1_000, controlMs, 'nobody', {}, { purpose: 'control', org: 'b' });
  b.command('forget', 1_000, eraseMs, purpose === 'operator' ? 'u-1' : 'ej-0', {}, { purpose, pairedWith: control.id });
  return run(erasureRemovedPerson, b, snapshot());
}

test('erasure: bounded in time when no fault overlaps, against the control command beside it', (t) => {
  const slow = new Builder();
  slow.command('forget', 1_000, ERASURE_EXIT_BOUND_MS + 1, 'u-1');
  t.regex(run(erasureRemovedPerson, slow, snapshot())[0].message, /took/);

  t.regex(besideControl('join-erasure', 1_500, 1_500 + ERASURE_BOUND_MS + 100)[0].message, /more than its control/);
  t.deepEqual(besideControl('join-erasure', 1_500, 1_500 + ERASURE_BOUND_MS - 100), []);
});

test("erasure: a loaded machine's start-up is charged to the control command, not to the operator's erasure", (t) => {
  // Start-up alone past the wall bound: the control (nothing to do) and the erasure beside it both exit after it.
  const startUp = ERASURE_EXIT_BOUND_MS + 1_000;
  t.deepEqual(besideControl('operator', startUp, startUp + ERASURE_BOUND_MS - 100), []);
  t.regex(besideControl('operator', startUp, startUp + ERASURE_BOUND_MS + 100)[0].message, /more than its control/);
});

test('erasure: an ID inside a Redis string counts only delimited', (t) => {
  const tokens = idTokens(['{"userId":"u-7"}', ' u-8 ', 'u-70', 'pu-9', 'x:u-10:y']);
  for (const held of ['u-7', 'u-8', 'u-70', 'u-10']) t.true(tokens.has(held), held);
  for (const not of ['u-9', 'u-1', 'u-0']) t.false(tokens.has(not), not);
});

// ---- property 4 ------------------------------------------------------------------------------

test('refused: a 4xx stores nothing; a bad request answered 2xx is reported', (t) => {
  const b = new Builder();
  b.bad(1_000, 'bad-1', 'bu-1');
  t.deepEqual(run(refusedStoredNothing, b, snapshot()), []);
  t.is(run(refusedStoredNothing, b, snapshot({ events: [row('bad-1', 'bu-1', 1_001)] })).length, 1);
  t.is(run(refusedStoredNothing, b, snapshot({ profileUsers: [{ org: 'a', userId: 'bu-1', profileId: 'p' }] })).length, 1);
  const accepted = new Builder();
  accepted.bad(1_000, 'bad-2', 'bu-2', { status: 202, body: '{}' });
  t.regex(run(refusedStoredNothing, accepted, snapshot())[0].message, /not 4xx/);
  // A 5xx before the body was judged (PostgreSQL away for an uncached key) is property 5's to judge; it still stores nothing.
  const unavailable = new Builder();
  unavailable.bad(1_000, 'bad-3', 'bu-3', { status: 500, body: '{"error":"Internal error"}' });
  t.deepEqual(run(refusedStoredNothing, unavailable, snapshot()), []);
  t.is(run(refusedStoredNothing, unavailable, snapshot({ events: [row('bad-3', 'bu-3', 1_001)] })).length, 1);
});

// ---- property 5 ------------------------------------------------------------------------------

test('5xx: documented ones during a fault or its recovery window; any other is reported', (t) => {
  const unavailable = { status: 503, body: '{"error":"Event storage is unavailable"}' };
  const b = new Builder();
  b.fault('redis-freeze', 0, 3_000);
  b.track(2_000, 'm1', 'u-1', unavailable);
  b.track(3_000 + RECOVERY_WINDOW_MS - 1_000, 'm2', 'u-1', unavailable);
  t.deepEqual(run(serverErrorsOnlyInFaults, b, snapshot()), []);
  b.track(3_000 + RECOVERY_WINDOW_MS + 1_000, 'm3', 'u-1', unavailable);
  b.identify(40_000, 'i1', 'u-1', null, { status: 503, body: '{"error":"Event storage is unavailable"}' });
  b.track(41_000, 'm4', 'u-1', { status: 502, body: 'Bad Gateway' });
  const found = run(serverErrorsOnlyInFaults, b, snapshot()).map((v) => v.message);
  t.is(found.length, 3);
  t.regex(found[0], /no fault/);
  t.regex(found[1], /undocumented identify/);
  t.regex(found[2], /undocumented track/);
});

test('5xx: answers outside the contract for valid requests are reported', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1', { status: 400, body: '{"error":"Required"}' });
  b.track(2_000, 'm2', 'u-1', { status: 202, body: '{"message_id":"m1","status":"accepted"}' });
  b.identify(3_000, 'i1', 'u-1', null, { status: 409, body: '{"error":"x"}' });
  // A 409 is right once another body with the messageId may have been recorded.
  const original = b.identify(3_500, 'i2', 'u-1', null, undefined, { body: '{"traits":{"plan":"a"}}' });
  b.identify(4_000, 'i2', 'u-1', null, { status: 409, body: '{"error":"x"}' }, { conflictOf: original.id, body: '{"traits":{"plan":"b"}}' });
  t.deepEqual(
    run(serverErrorsOnlyInFaults, b, snapshot()).map((v) => v.subject),
    ['op#1 (track)', 'op#2 (track)', 'op#3 (identify)'],
  );
});

// ---- property 6 ------------------------------------------------------------------------------

const valid = (messageId: string) => ({ role: 'valid' as const, api: 'track' as const, messageId, userId: `pu-${messageId}` });
const refused = (messageId: string | null) => ({ role: 'refused' as const, api: 'track' as const, messageId, userId: messageId && `pu-${messageId}` });

test('pipelined: the valid answer first, then the refusal and a close; the refusal must not replace it', (t) => {
  const ok = new Builder();
  ok.pipeline(
    1_000,
    'two-cl',
    [valid('p1'), refused('p2')],
    [
      [202, '{"message_id":"p1","status":"accepted"}'],
      [400, '{"error":"Bad request"}'],
    ],
  );
  t.deepEqual(run(answersInRequestOrder, ok, snapshot({ events: [row('p1', 'pu-p1', 1_001)] })), []);
  t.regex(run(answersInRequestOrder, ok, snapshot())[0].message, /stored nowhere/);

  const replaced = new Builder();
  replaced.pipeline(1_000, 'bad-chunk', [valid('p1'), refused('p2')], [[400, '{"error":"Bad request"}']]);
  t.regex(run(answersInRequestOrder, replaced, snapshot())[0].message, /replaced its answer/);
});

test('pipelined: a request behind a closing answer gets none and stores nothing', (t) => {
  const b = new Builder();
  b.pipeline(
    1_000,
    'expect',
    [valid('p1'), refused('p2'), { role: 'behind', api: 'track', messageId: 'p3', userId: 'pu-p3' }],
    [
      [202, '{"message_id":"p1","status":"accepted"}'],
      [417, '{"error":"Expectation failed"}'],
    ],
  );
  const events = [row('p1', 'pu-p1', 1_001)];
  t.deepEqual(run(answersInRequestOrder, b, snapshot({ events })), []);
  t.regex(run(answersInRequestOrder, b, snapshot({ events: [...events, row('p3', 'pu-p3', 1_002)] }))[0].message, /behind track request stored/);
});

test('pipelined: a gateway killed under the connection excuses the order, not what was stored', (t) => {
  const b = new Builder();
  b.fault('gateway-kill', 900, 2_000);
  b.pipeline(1_000, 'garbage', [valid('p1'), refused(null)], [], false);
  t.deepEqual(run(answersInRequestOrder, b, snapshot()), []);
});

// ---- property 7 ------------------------------------------------------------------------------

test('export: every stored event of the person, padded spellings included, and none other', (t) => {
  const doc = (events: [string, string, number][]) =>
    JSON.stringify({
      userId: 'u-1',
      userIds: ['u-1', 'u-2'],
      events: events.map(([messageId, userId, at]) => ({ receivedAt: T0 + at, event: { messageId, userId } })),
    });
  const events = [row('m1', 'u-1', 1_000), row('m2', ' u-2 ', 2_000), row('m3', 'u-3', 3_000)];
  const complete = new Builder();
  complete.command(
    'export',
    10_000,
    500,
    'u-1',
    {
      stdout: doc([
        ['m1', 'u-1', 1_000],
        ['m2', ' u-2 ', 2_000],
      ]),
    },
    { purpose: 'final-export' },
  );
  t.deepEqual(run(exportListsEveryEvent, complete, snapshot({ events })), []);
  const partial = new Builder();
  partial.command('export', 10_000, 500, 'u-1', { stdout: doc([['m1', 'u-1', 1_000]]) }, { purpose: 'final-export' });
  const [v] = run(exportListsEveryEvent, partial, snapshot({ events }));
  t.deepEqual(v.details, ['stored, not listed: messageId m2, userId " u-2 "']);
  const failed = new Builder();
  failed.command('export', 10_000, 500, 'u-1', { exitCode: 1, stderr: 'intake: boom' });
  t.regex(run(exportListsEveryEvent, failed, snapshot())[0].message, /exited 1/);
});

// ---- property 8 ------------------------------------------------------------------------------

test('replica: every gateway back on it within the bound', (t) => {
  const probe = (samples: [string, number, number | null][]): Builder => {
    const b = new Builder();
    b.entries.push({
      type: 'replica-probe',
      id: 99,
      replicaUpAt: T0,
      gateways: ['g1', 'g2'],
      samples: samples.map(([gateway, at, inUse]) => ({ gateway, at: T0 + at, inUse })),
    });
    return b;
  };
  t.deepEqual(
    run(
      replicaUsedAgain,
      probe([
        ['g1', 500, 0],
        ['g1', 1_000, 1],
        ['g2', 2_000, 1],
      ]),
      snapshot(),
    ),
    [],
  );
  const late = run(
    replicaUsedAgain,
    probe([
      ['g1', 1_000, 1],
      ['g2', 1_000, 0],
      ['g2', REPLICA_REUSE_BOUND_MS + 1_000, 1],
    ]),
    snapshot(),
  );
  t.is(late.length, 1);
  t.regex(late[0].message, /only/);
  t.regex(
    run(
      replicaUsedAgain,
      probe([
        ['g1', 1_000, 1],
        ['g2', 1_000, 0],
      ]),
      snapshot(),
    )[0].message,
    /did not read/,
  );
});

// ---- the whole ---------------------------------------------------------------------------------

test('check runs every property; the minimal history holds the ops, the erasure and the fault around them', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  b.fault('pg-freeze', 1_500, 2_000);
  b.command('forget', 50_000, 500, 'u-9');
  b.command('forget', 6_000, 500, 'u-1', { exitCode: 1, stderr: 'no' });
  b.track(100_000, 'other', 'u-5');
  const violations = check(b.history(), snapshot({ events: [row('other', 'u-5', 100_001)], drained: false }, 200_000), FACTS);
  t.deepEqual(violations.map((v) => v.property).sort(), ['erasureRemovedPerson', 'runSettled']);
  const [erasure] = violations.filter((v) => v.property === 'erasureRemovedPerson');
  const shown = minimalHistory(b.history(), erasure).map((e) => e.id);
  t.true(shown.includes(4), 'the erasure');
  t.false(shown.includes(5), 'not an op of another person far away');
});

test('keys: a messageId key is a uuid of SHA-256, a user key its first 64 bits signed', (t) => {
  t.regex(messageKeyOf('m-1'), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  t.is(userKeyOf(' u-1 '), userKeyOf('u-1'));
  t.is(typeof BigInt(userKeyOf('u-1')), 'bigint');
});

test('pipelined: a valid Track whose day passed the retention by the check may be gone', (t) => {
  const b = new Builder();
  b.pipeline(
    1_000,
    'two-cl',
    [valid('p1'), refused('p2')],
    [
      [202, '{"message_id":"p1","status":"accepted"}'],
      [400, '{"error":"Bad request"}'],
    ],
  );
  t.deepEqual(run(answersInRequestOrder, b, snapshot({}, 60_000, 2 * DAY_MS)), []);
});

test('track: a messageId record without its event is reported until its day passes the retention', (t) => {
  const b = new Builder();
  b.track(1_000, 'm1', 'u-1');
  b.command('forget', 2_000, 500, 'u-1');
  const orphan = { org: 'a' as const, messageHash: messageHashOf('m1'), receivedAt: T0 + 1_001 };
  const [v] = run(trackStoredExactlyOnce, b, snapshot({ orphanMessageIds: [orphan] }));
  t.is(v.subject, 'messageId m1');
  t.regex(v.message, /without its event/);
  t.deepEqual(run(trackStoredExactlyOnce, b, snapshot({ orphanMessageIds: [orphan] }, 60_000, 2 * DAY_MS)), []);
});
