import test from 'ava';
import { eventNamesOf, parseJourneyDefinition } from '../../journeys/journey-definition.ts';

const example = {
  name: 'Onboarding',
  entry: { event: 'Signed Up' },
  steps: [{ waitUntil: { event: 'Activated', timeoutMs: 259200000 } }, { send: { channel: 'email', template: 'welcome' } }],
  exitOn: ['Unsubscribed'],
  goal: { event: 'Purchased', windowMs: 604800000 },
  reentry: false,
};

const errorsOf = (input: unknown) => {
  const parsed = parseJourneyDefinition(input);
  return parsed.ok ? [] : parsed.errors;
};

test('the example of product.md is valid and kept as written', (t) => {
  const parsed = parseJourneyDefinition(example);
  t.deepEqual(parsed, { ok: true, value: example });
});

test('optional parts take their defaults: no exits, no goal, no reentry; a wait may have no timeout', (t) => {
  const parsed = parseJourneyDefinition({ name: 'n', entry: { attributeChanged: '*' }, steps: [{ waitUntil: { event: 'A' } }, { delay: { ms: 0 } }] });
  t.deepEqual(parsed, {
    ok: true,
    value: {
      name: 'n',
      entry: { attributeChanged: '*' },
      steps: [{ waitUntil: { event: 'A', timeoutMs: null } }, { delay: { ms: 0 } }],
      exitOn: [],
      goal: null,
      reentry: false,
    },
  });
});

test('every bad field is named by its path', (t) => {
  t.deepEqual(errorsOf({ ...example, name: ' ', extra: 1 }), ['extra: unknown field', 'name: must be a non-empty string']);
  t.deepEqual(errorsOf({ ...example, entry: { event: 'A', attributeChanged: 'b' } }), ['entry: must have exactly one of "event" or "attributeChanged"']);
  t.deepEqual(errorsOf({ ...example, entry: 'Signed Up' }), ['entry: must be an object: { "event": NAME } or { "attributeChanged": TRAIT }']);
  t.deepEqual(errorsOf({ ...example, steps: {} }), ['steps: must be an array']);
  t.deepEqual(errorsOf({ ...example, steps: [{ send: { channel: 'fax', template: '' } }] }), [
    'steps[0].send.channel: must be "email" or "sms"',
    'steps[0].send.template: must be a non-empty string',
  ]);
  t.deepEqual(errorsOf({ ...example, steps: [{ delay: { ms: 1.5 } }, { wait: {} }, { delay: 5 }] }), [
    'steps[0].delay.ms: must be a whole number of milliseconds from 0 to 315360000000',
    'steps[1]: must be an object with exactly one of "waitUntil", "delay" or "send"',
    'steps[2].delay: must be an object',
  ]);
  t.deepEqual(errorsOf({ ...example, steps: [{ waitUntil: { event: 'A', timeoutMs: -1, after: 2 } }] }), [
    'steps[0].waitUntil.after: unknown field',
    'steps[0].waitUntil.timeoutMs: must be a whole number of milliseconds from 0 to 315360000000',
  ]);
  t.deepEqual(errorsOf({ ...example, exitOn: ['ok', 3] }), ['exitOn[1]: must be a non-empty string']);
  t.deepEqual(errorsOf({ ...example, goal: { event: 'P' } }), ['goal.windowMs: must be a whole number of milliseconds from 0 to 315360000000']);
  t.deepEqual(errorsOf({ ...example, reentry: 'yes' }), ['reentry: must be true or false']);
  t.deepEqual(errorsOf([]), ['journey: must be a JSON object']);
});

test("the service's own event names cannot be used as journey events", (t) => {
  t.deepEqual(errorsOf({ ...example, entry: { event: 'profile_fields_changed' } }), [
    "entry.event: profile_fields_changed is reserved for the service's own events (use entry.attributeChanged for profile changes)",
  ]);
});

test('eventNamesOf lists entry, waits, exits and goal once each', (t) => {
  t.deepEqual(eventNamesOf({ ...example, exitOn: ['Unsubscribed', 'Activated'], steps: example.steps as never }), [
    'Signed Up',
    'Activated',
    'Unsubscribed',
    'Purchased',
  ]);
});
