import test from 'ava';
import type { JourneyDefinition } from '../../journeys/journey-definition.ts';
import { advance, awaitsEvents, mayEnter, onEvent, onTimer, startRun } from '../../journeys/journey-run.ts';

const def: JourneyDefinition = {
  name: 'Onboarding',
  entry: { event: 'Signed Up' },
  steps: [
    { waitUntil: { event: 'Activated', timeoutMs: 1000 } },
    { send: { channel: 'email', template: 'welcome' } },
    { delay: { ms: 500 } },
    { send: { channel: 'sms', template: 'bye' } },
  ],
  exitOn: ['Unsubscribed'],
  goal: { event: 'Purchased', windowMs: 10_000 },
  reentry: false,
};
const ev = (name: string, receivedAt: number, messageId = `${name}-${receivedAt}`) => ({ name, receivedAt, messageId });

test('a new run stops at its first wait, due at entry + timeout', (t) => {
  const { run, sends } = startRun(def, 100, 'entry');
  t.like(run, { status: 'active', step: 0, waitingFor: 'Activated', dueAt: 1100, enteredAt: 100 });
  t.deepEqual(sends, []);
});

test('the awaited event ends the wait: the send runs and the next delay starts at the event time', (t) => {
  const { run } = startRun(def, 100, 'entry');
  const next = onEvent(def, run, ev('Activated', 400));
  t.like(next.run, { step: 2, stepStartedAt: 400, dueAt: 900, waitingFor: null, status: 'active' });
  t.deepEqual(next.sends, [{ step: 1, channel: 'email', template: 'welcome' }]);
  const done = onTimer(def, next.run, 900);
  t.like(done.run, { status: 'completed', step: 4, endedAt: 900 });
  t.deepEqual(done.sends, [{ step: 3, channel: 'sms', template: 'bye' }]);
});

test('the timeout ends the wait at the due time, however late the timer fires', (t) => {
  const { run } = startRun(def, 100, 'entry');
  t.false(onTimer(def, run, 1099).changed);
  const next = onTimer(def, run, 5000);
  t.like(next.run, { step: 2, stepStartedAt: 1100, dueAt: 1600 });
});

test('events before the entry or the wait, other names, and late arrivals after the timeout change nothing', (t) => {
  const { run } = startRun(def, 100, 'entry');
  t.false(onEvent(def, run, ev('Activated', 99)).changed);
  t.false(onEvent(def, run, ev('Page Viewed', 200)).changed);
  t.false(onEvent(def, run, ev('Activated', 1101)).changed);
  t.false(onEvent(def, run, { name: 'Purchased', receivedAt: 100, messageId: 'entry' }).changed, 'the entry event is not its own goal');
});

test('exitOn ends an active run; the goal converts once within the window, whatever the status', (t) => {
  const { run } = startRun(def, 100, 'entry');
  const exited = onEvent(def, run, ev('Unsubscribed', 300)).run;
  t.like(exited, { status: 'exited', endedAt: 300, dueAt: null });
  const converted = onEvent(def, exited, ev('Purchased', 400)).run;
  t.is(converted.convertedAt, 400);
  t.false(onEvent(def, converted, ev('Purchased', 500)).changed, 'once per run');
  t.false(onEvent(def, run, ev('Purchased', 10_101)).changed, 'outside the window');
  t.true(onEvent(def, run, ev('Purchased', 10_100)).changed, 'the window is inclusive');
});

test('a journey without steps completes on entry; sends in a row all run', (t) => {
  t.like(startRun({ ...def, steps: [] }, 5, null).run, { status: 'completed', endedAt: 5 });
  const sends = startRun({ ...def, steps: [{ send: { channel: 'email', template: 'a' } }, { send: { channel: 'email', template: 'b' } }] }, 5, null).sends;
  t.deepEqual(
    sends.map((s) => s.step),
    [0, 1],
  );
});

test('mayEnter: never beside an active run; again after one ended only with reentry', (t) => {
  t.true(mayEnter(def, []));
  t.false(mayEnter({ ...def, reentry: true }, [{ status: 'active' }]));
  t.false(mayEnter(def, [{ status: 'completed' }]));
  t.true(mayEnter({ ...def, reentry: true }, [{ status: 'exited' }]));
});

test('advance: timers due before each event fire first; an event at the very moment a wait times out still ends it', (t) => {
  const waitDef: JourneyDefinition = {
    ...def,
    steps: [{ waitUntil: { event: 'Activated', timeoutMs: 1000 } }, { delay: { ms: 100 } }],
    exitOn: ['Unsubscribed'],
  };
  const { run } = startRun(waitDef, 0, 'entry');
  t.like(advance(waitDef, run, [ev('Activated', 1000)], 1000).run, { step: 1, stepStartedAt: 1000, dueAt: 1100 });
  t.like(
    advance(waitDef, run, [ev('Activated', 1001)], 1001).run,
    { step: 1, stepStartedAt: 1000, dueAt: 1100 },
    'timed out at 1000, then the late event changes nothing',
  );
  // The delay ended at 1100, before the exit at 1150: the run completed; the exit comes too late.
  t.like(advance(waitDef, run, [ev('Activated', 1000), ev('Unsubscribed', 1150)], 2000).run, { status: 'completed', endedAt: 1100 });
  // An exit at 1050 comes first.
  t.like(advance(waitDef, run, [ev('Activated', 1000), ev('Unsubscribed', 1050)], 2000).run, { status: 'exited', endedAt: 1050 });
  // Nothing beyond `until`.
  t.like(advance(waitDef, run, [ev('Activated', 500)], 400).run, { step: 0, waitingFor: 'Activated' });
});

test('the event that ends a wait cannot end the next wait on the same name', (t) => {
  const twice: JourneyDefinition = { ...def, steps: [{ waitUntil: { event: 'A', timeoutMs: null } }, { waitUntil: { event: 'A', timeoutMs: null } }] };
  const { run } = startRun(twice, 0, 'entry');
  const once = onEvent(twice, run, ev('A', 10, 'a1')).run;
  t.like(once, { step: 1, stepTriggerId: 'a1' });
  t.false(onEvent(twice, once, ev('A', 10, 'a1')).changed, 'replayed');
  t.like(onEvent(twice, once, ev('A', 10, 'a2')).run, { status: 'completed' });
});

test('awaitsEvents: an active run always; an ended run while its goal may still be reached', (t) => {
  const { run } = startRun(def, 100, 'entry');
  t.true(awaitsEvents(def, run, 50_000), 'active');
  const exited = onEvent(def, run, ev('Unsubscribed', 300)).run;
  t.true(awaitsEvents(def, exited, 300));
  t.true(awaitsEvents(def, exited, 10_099), 'a goal at entry + window still counts');
  t.false(awaitsEvents(def, exited, 10_100), 'nothing after the window can convert');
  t.false(awaitsEvents(def, onEvent(def, exited, ev('Purchased', 400)).run, 400), 'converted already');
  t.false(awaitsEvents({ ...def, goal: null }, exited, 300), 'no goal');
});
