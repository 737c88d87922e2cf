// The live view's reading of queued events' heads (gateway/live/batch-digest.ts: the text that
// HEADS_SCRIPT returns for each event, decoded) and its shared reads (shared-read.ts). The script
// itself runs against Redis in test/ops/live-view.test.ts.
import test from 'ava';
import { storedTrackPayload } from '../../events/track-payload.ts';
import { fieldIs, KEPT_CHARS, leadingMembers, parseHead, readString } from '../../gateway/live/batch-digest.ts';
import { createSharedReads } from '../../gateway/live/shared-read.ts';

const ENV = '0b8f2c4e-1111-4222-8333-444455556666';

/** An event's text inside a job, as BullMQ writes the gateway's QueuedEvent, cut where HEADS_SCRIPT cuts it. */
function headText(body: Record<string, unknown>): string {
  const queued = { environmentId: ENV, messageId: body.messageId, receivedAt: 1767261600123, timestampMs: 1767261600000, payload: storedTrackPayload(body) };
  const text = JSON.stringify(queued);
  return text.slice(0, text.indexOf(',\\"properties\\":'));
}

test('a head of the gateway form: environment, messageId, receivedAt, event, user and anonymous ID', (t) => {
  const head = parseHead(
    headText({ type: 'track', messageId: 'm-1', event: 'Signed Up', userId: 'ann', timestamp: '2026-01-01T10:00:00Z', properties: { a: 1 } }),
  );
  t.deepEqual(head, {
    environmentId: ENV,
    messageId: { value: 'm-1', whole: true },
    receivedAt: 1767261600123,
    event: { value: 'Signed Up', whole: true },
    userId: { value: 'ann', whole: true },
    anonymousId: null,
  });
});

test('values with quotes, backslashes, escapes, controls, bidi, lone surrogates and markers are read back exactly', (t) => {
  const tricky = [
    'q"uote',
    'back\\slash\\',
    '\\"',
    ',"payload":"',
    ',\\"properties\\":',
    '{"environmentId":"x"}',
    'nul\u0000bel\u0007',
    'rlo\u202eltr',
    'lone\ud800',
    '🙂é',
    '\u2028',
    '',
  ];
  for (const value of tricky) {
    const head = parseHead(
      headText({ type: 'track', messageId: `m${value}`, event: value, userId: null, anonymousId: value, timestamp: '2026-01-01T10:00:00Z' }),
    );
    t.is(head?.messageId.value, `m${value}`, JSON.stringify(value));
    t.is(head?.event.value, value, JSON.stringify(value));
    t.is(head?.anonymousId?.value, value, JSON.stringify(value));
    t.is(head?.userId, null);
  }
});

test('a value longer than KEPT_CHARS is kept cut, and matched by the hash of its whole value', (t) => {
  const long = 'u'.repeat(KEPT_CHARS) + '-tail';
  const head = parseHead(headText({ type: 'track', messageId: 'm-long', event: 'E', userId: long, timestamp: '2026-01-01T10:00:00Z' }))!;
  t.is(head.userId!.value, 'u'.repeat(KEPT_CHARS));
  t.false(head.userId!.whole);
  t.regex(head.userId!.hash ?? '', /^[0-9a-f]{64}$/);
  t.true(fieldIs(head.userId, long));
  t.false(fieldIs(head.userId, 'u'.repeat(KEPT_CHARS)));
  t.false(fieldIs(head.userId, `${long}x`));
  t.true(fieldIs(head.messageId, 'm-long'));
  t.false(fieldIs(head.messageId, 'm-lon'));
  t.false(fieldIs(null, 'x'));
});

test('a head cut short (a payload of another form): what is whole is read, the rest is not matched', (t) => {
  const text = JSON.stringify({ environmentId: ENV, messageId: 'm-2', receivedAt: 5, timestampMs: 5, payload: '{"userId":"abcdef","x":1}' }).slice(0, 110);
  const head = parseHead(text)!;
  t.is(head.messageId.value, 'm-2');
  t.is(head.receivedAt, 5);
  t.is(head.event.value, '');
  t.false(head.event.whole);
  t.is(parseHead('{"messageId":"no environment"}'), null);
  t.is(parseHead('{"environmentId":"x","messageId":'), null);
  t.is(parseHead(''), null);
});

test('leadingMembers: scalars up to the first object or array, or to where the text stops', (t) => {
  t.deepEqual(
    [...leadingMembers('{ "a" : "x" , "b":-1.5e3,"c":null,"d":true,"e":{"f":1},"g":2}').entries()],
    [
      ['a', { value: 'x', whole: true }],
      ['b', { value: -1500, whole: true }],
      ['c', { value: null, whole: true }],
      ['d', { value: true, whole: true }],
    ],
  );
  t.deepEqual([...leadingMembers('{"a":"x\\u00').entries()], [['a', { value: 'x', whole: false }]]);
  t.deepEqual([...leadingMembers('{"a":12').entries()], [], 'a number the text stops inside of is not read');
  t.deepEqual([...leadingMembers('[1]').entries()], []);
});

test('readString: escapes, and where a string cut short stops', (t) => {
  t.deepEqual(readString('a\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u0041\\ud83d\\ude42"rest', 0), { value: 'a"b\\c/\b\f\n\r\tA🙂', whole: true, end: 38 });
  t.deepEqual(readString('abc\\', 0), { value: 'abc', whole: false, end: 4 });
  t.deepEqual(readString('abc\\u12', 0), { value: 'abc', whole: false, end: 7 });
  t.deepEqual(readString('abc\\x"', 0), { value: 'abc', whole: false, end: 6 });
});

test('shared reads: one read per key while it is fresh, whoever asks; a failed read is not kept', async (t) => {
  let now = 0;
  const shared = createSharedReads({ ttlMs: 2000, maxKeys: 3, now: () => now });
  let reads = 0;
  const read = async () => ++reads;
  const first = await Promise.all([shared.get('a', read), shared.get('a', read), shared.get('a', read)]);
  t.deepEqual(first, [1, 1, 1], 'at once: one read');
  now = 1999;
  t.is(await shared.get('a', read), 1, 'still fresh');
  now = 2000;
  t.is(await shared.get('a', read), 2, 'expired: read again');
  t.is(await shared.get('b', read), 3, 'another key: a read of its own');
  shared.forget('b');
  t.is(await shared.get('b', read), 4, 'forgotten: read again');

  await t.throwsAsync(
    shared.get('c', async () => Promise.reject(new Error('redis away'))),
    { message: 'redis away' },
  );
  t.is(await shared.get('c', read), 5, 'a failed read is not kept');

  // Beyond maxKeys the oldest go.
  for (const key of ['d', 'e', 'f']) await shared.get(key, read);
  t.is(await shared.get('a', read), 9, 'pushed out by newer keys');
});
