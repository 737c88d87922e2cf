import test from 'ava';
import { checkTrack, TRACK_MESSAGES } from '../../events/track.ts';
import { receivedType } from '../../platform/validation/received-type.ts';

const valid = () => ({
  type: 'track',
  messageId: 'msg-1',
  event: 'Order Completed',
  timestamp: '2024-01-15T10:30:00Z',
  userId: 'user-1',
});

// Overrides of the valid body; `undefined` removes the field.
function body(overrides: Record<string, unknown>): Record<string, unknown> {
  const b: Record<string, unknown> = { ...valid(), ...overrides };
  for (const k of Object.keys(b)) if (b[k] === undefined) delete b[k];
  return b;
}

const failsWith = test.macro({
  exec(t, input: unknown, message: string) {
    t.deepEqual(checkTrack(input), { ok: false, message });
  },
  title: (provided = '', _input: unknown, message: string) => `${provided} -> ${message}`,
});

const passes = test.macro({
  exec(t, input: unknown) {
    t.true(checkTrack(input).ok);
  },
  title: (provided = '') => `accepted: ${provided}`,
});

test('the messages are the exact zod wording', (t) => {
  t.is(TRACK_MESSAGES.invalidType, 'Invalid literal value, expected "track"');
  t.is(TRACK_MESSAGES.required, 'Required');
  t.is(TRACK_MESSAGES.emptyString, 'String must contain at least 1 character(s)');
  t.is(TRACK_MESSAGES.reservedEvent, 'Reserved event name');
  t.is(TRACK_MESSAGES.invalidDatetime, 'Invalid datetime');
  t.is(TRACK_MESSAGES.idRequired, 'At least one of userId or anonymousId is required');
  t.is(TRACK_MESSAGES.expectedString.number, 'Expected string, received number');
  t.is(TRACK_MESSAGES.expectedObject.array, 'Expected object, received array');
  t.is(TRACK_MESSAGES.notWellFormed, 'String must be well-formed Unicode (no unpaired surrogate)');
});

test('receivedType names JSON types like zod', (t) => {
  t.deepEqual([null, [], 'a', 1, true, {}, undefined].map(receivedType), ['null', 'array', 'string', 'number', 'boolean', 'object', 'undefined']);
});

// Body shape
test('body array', failsWith, [valid()], 'Expected object, received array');
test('body null', failsWith, null, 'Expected object, received null');
test('body string', failsWith, 'track', 'Expected object, received string');
test('body number', failsWith, 1, 'Expected object, received number');
test('body boolean', failsWith, true, 'Expected object, received boolean');
test('batch envelope', failsWith, { batch: [valid()] }, 'Invalid literal value, expected "track"');

// type
test('type missing', failsWith, body({ type: undefined }), TRACK_MESSAGES.invalidType);
test('type identify', failsWith, body({ type: 'identify' }), TRACK_MESSAGES.invalidType);
test('type Track', failsWith, body({ type: 'Track' }), TRACK_MESSAGES.invalidType);
test('type " track"', failsWith, body({ type: ' track' }), TRACK_MESSAGES.invalidType);
test('type null', failsWith, body({ type: null }), TRACK_MESSAGES.invalidType);
test('type array', failsWith, body({ type: ['track'] }), TRACK_MESSAGES.invalidType);

// messageId
test('messageId missing', failsWith, body({ messageId: undefined }), 'Required');
test('messageId null', failsWith, body({ messageId: null }), 'Expected string, received null');
test('messageId number', failsWith, body({ messageId: 42 }), 'Expected string, received number');
test('messageId boolean', failsWith, body({ messageId: false }), 'Expected string, received boolean');
test('messageId array', failsWith, body({ messageId: ['a'] }), 'Expected string, received array');
test('messageId object', failsWith, body({ messageId: { id: 'a' } }), 'Expected string, received object');
test('messageId empty', failsWith, body({ messageId: '' }), 'String must contain at least 1 character(s)');

// userId / anonymousId
test('userId number', failsWith, body({ userId: 7 }), 'Expected string, received number');
test('userId boolean', failsWith, body({ userId: true }), 'Expected string, received boolean');
test('userId array', failsWith, body({ userId: ['u'] }), 'Expected string, received array');
test('userId object', failsWith, body({ userId: {} }), 'Expected string, received object');
test('anonymousId number', failsWith, body({ anonymousId: 7 }), 'Expected string, received number');
test('anonymousId object', failsWith, body({ anonymousId: {} }), 'Expected string, received object');

// event
test('event missing', failsWith, body({ event: undefined }), 'Required');
test('event null', failsWith, body({ event: null }), 'Expected string, received null');
test('event number', failsWith, body({ event: 1 }), 'Expected string, received number');
test('event empty', failsWith, body({ event: '' }), 'String must contain at least 1 character(s)');
test('event profile_fields_changed', failsWith, body({ event: 'profile_fields_changed' }), 'Reserved event name');
test('event subscription_changed', failsWith, body({ event: 'subscription_changed' }), 'Reserved event name');

// timestamp
test('timestamp missing', failsWith, body({ timestamp: undefined }), 'Required');
test('timestamp null', failsWith, body({ timestamp: null }), 'Expected string, received null');
test('timestamp number', failsWith, body({ timestamp: 1705314600000 }), 'Expected string, received number');
test('timestamp object', failsWith, body({ timestamp: {} }), 'Expected string, received object');
test('timestamp no zone', failsWith, body({ timestamp: '2024-01-15T10:30:00' }), 'Invalid datetime');
test('timestamp Feb 30', failsWith, body({ timestamp: '2024-02-30T10:30:00Z' }), 'Invalid datetime');
test('timestamp epoch string', failsWith, body({ timestamp: '1705314600000' }), 'Invalid datetime');
test('timestamp empty', failsWith, body({ timestamp: '' }), 'Invalid datetime');

// context / integrations / properties
for (const field of ['context', 'integrations', 'properties']) {
  test(`${field} null`, failsWith, body({ [field]: null }), 'Expected object, received null');
  test(`${field} array`, failsWith, body({ [field]: [] }), 'Expected object, received array');
  test(`${field} string`, failsWith, body({ [field]: '{}' }), 'Expected object, received string');
  test(`${field} number`, failsWith, body({ [field]: 0 }), 'Expected object, received number');
  test(`${field} boolean`, failsWith, body({ [field]: false }), 'Expected object, received boolean');
}

// At least one ID
test('no IDs', failsWith, body({ userId: undefined }), TRACK_MESSAGES.idRequired);
test('both IDs null', failsWith, body({ userId: null, anonymousId: null }), TRACK_MESSAGES.idRequired);
test('both IDs empty', failsWith, body({ userId: '', anonymousId: '' }), TRACK_MESSAGES.idRequired);
test('both IDs whitespace', failsWith, body({ userId: '  ', anonymousId: '\t\n' }), TRACK_MESSAGES.idRequired);
test('userId whitespace, no anonymousId', failsWith, body({ userId: '   ' }), TRACK_MESSAGES.idRequired);

test('userId only', passes, body({}));
test('anonymousId only', passes, body({ userId: undefined, anonymousId: 'anon-1' }));
test('userId null with anonymousId', passes, body({ userId: null, anonymousId: 'anon-1' }));
test('userId empty with anonymousId', passes, body({ userId: '', anonymousId: 'anon-1' }));
test('whitespace messageId', passes, body({ messageId: '  ' }));
test('whitespace event', passes, body({ event: ' ' }));
test('reserved name in other case', passes, body({ event: 'Profile_Fields_Changed' }));
test('reserved name with a space', passes, body({ event: 'subscription_changed ' }));
test('far-future timestamp', passes, body({ timestamp: '9999-12-31T23:59:59Z' }));
test('pre-1970 timestamp', passes, body({ timestamp: '0001-01-01T00:00:00Z' }));

// Identifiers with an unpaired UTF-16 surrogate (platform/validation/well-formed.ts)
for (const [name, value] of [
  ['high', 'a\ud800'],
  ['low', '\udfffa'],
  ['reversed pair', '\udc00\ud800'],
  ['high then high', '\ud800\ud800\udc00'],
] as const) {
  test(`messageId lone surrogate (${name})`, failsWith, body({ messageId: value }), TRACK_MESSAGES.notWellFormed);
  test(`userId lone surrogate (${name})`, failsWith, body({ userId: value }), TRACK_MESSAGES.notWellFormed);
  test(`anonymousId lone surrogate (${name})`, failsWith, body({ anonymousId: value }), TRACK_MESSAGES.notWellFormed);
}
test('userId lone surrogate with a valid anonymousId', failsWith, body({ userId: '\ud800', anonymousId: 'anon-1' }), TRACK_MESSAGES.notWellFormed);
test('IDs with surrogate pairs', passes, body({ messageId: '😀', userId: 'u😀', anonymousId: '\ud83d\ude00' }));
test('free values keep a lone surrogate', passes, body({ event: 'E\ud800', properties: { '\udfff': '\ud800' }, context: { a: '\udc00' } }));
test('order: messageId surrogate before userId type', failsWith, body({ messageId: '\ud800', userId: 1 }), TRACK_MESSAGES.notWellFormed);
test('order: messageId type before userId surrogate', failsWith, body({ messageId: 1, userId: '\ud800' }), 'Expected string, received number');
test('order: userId surrogate before anonymousId type', failsWith, body({ userId: '\ud800', anonymousId: 1 }), TRACK_MESSAGES.notWellFormed);
test('order: anonymousId surrogate before event', failsWith, body({ anonymousId: '\udc00', event: undefined }), TRACK_MESSAGES.notWellFormed);

// Field order: the first problem in spec order wins.
test('order: type before messageId', failsWith, body({ type: 'x', messageId: 1 }), TRACK_MESSAGES.invalidType);
test('order: messageId before userId', failsWith, body({ messageId: '', userId: 1 }), TRACK_MESSAGES.emptyString);
test('order: userId before anonymousId', failsWith, body({ userId: true, anonymousId: 1 }), 'Expected string, received boolean');
test('order: anonymousId before event', failsWith, body({ anonymousId: 1, event: undefined }), 'Expected string, received number');
test('order: event before timestamp', failsWith, body({ event: '', timestamp: 'x' }), TRACK_MESSAGES.emptyString);
test('order: reserved event before timestamp', failsWith, body({ event: 'subscription_changed', timestamp: 'x' }), TRACK_MESSAGES.reservedEvent);
test('order: timestamp before context', failsWith, body({ timestamp: 'x', context: null }), TRACK_MESSAGES.invalidDatetime);
test('order: context before integrations', failsWith, body({ context: [], integrations: null }), 'Expected object, received array');
test('order: integrations before properties', failsWith, body({ integrations: null, properties: [] }), 'Expected object, received null');
test('order: properties before ID rule', failsWith, body({ userId: undefined, properties: 1 }), 'Expected object, received number');
test('order: ID rule last', failsWith, body({ userId: '' }), TRACK_MESSAGES.idRequired);
test('order: missing everything reports type', failsWith, {}, TRACK_MESSAGES.invalidType);
test('order: only type reports messageId', failsWith, { type: 'track' }, 'Required');

test('accepted event: defaults, IDs as sent, unknown fields dropped', (t) => {
  const result = checkTrack({
    ...valid(),
    userId: '  user-1 ',
    sentAt: '2024-01-15T10:30:01Z',
    writeKey: 'wk',
    version: 2,
    channel: 'server',
  });
  t.deepEqual(result, {
    ok: true,
    timestampMs: Date.UTC(2024, 0, 15, 10, 30),
    event: {
      type: 'track',
      messageId: 'msg-1',
      event: 'Order Completed',
      timestamp: '2024-01-15T10:30:00Z',
      userId: '  user-1 ',
      anonymousId: null,
      properties: {},
      context: {},
      integrations: {},
    },
  });
});

test('accepted event keeps objects, empty userId and timestamp text as sent', (t) => {
  const properties = { total: 12.5, items: [{ sku: 'a' }] };
  const context = { ip: '1.2.3.4' };
  const integrations = { All: false };
  const result = checkTrack({
    ...valid(),
    userId: '',
    anonymousId: 'anon',
    timestamp: '2024-01-15T12:30:00.123456+02:00',
    properties,
    context,
    integrations,
  });
  if (!result.ok) return t.fail(result.message);
  t.is(result.event.userId, '');
  t.is(result.event.anonymousId, 'anon');
  t.is(result.event.timestamp, '2024-01-15T12:30:00.123456+02:00');
  t.is(result.timestampMs, Date.UTC(2024, 0, 15, 10, 30, 0, 123));
  t.deepEqual(result.event.properties, properties);
  t.deepEqual(result.event.context, context);
  t.deepEqual(result.event.integrations, integrations);
});

test('an absent anonymousId and a null userId both become null', (t) => {
  const result = checkTrack(body({ userId: null, anonymousId: 'a' }));
  if (!result.ok) return t.fail(result.message);
  t.is(result.event.userId, null);
  const other = checkTrack(body({}));
  if (!other.ok) return t.fail(other.message);
  t.is(other.event.anonymousId, null);
});

test('defaults are fresh objects per call', (t) => {
  const a = checkTrack(body({}));
  const b = checkTrack(body({}));
  if (!a.ok || !b.ok) return t.fail();
  t.not(a.event.properties, b.event.properties);
});
