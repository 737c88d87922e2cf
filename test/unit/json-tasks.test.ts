import test from 'ava';
import { JSON_TASKS } from '../../gateway/json-tasks.ts';
import { decodeTrack } from '../../events/track.ts';
import { decodeIdentify } from '../../identify/validation.ts';
import { planIdentifyBatch, toIdentifyCall } from '../../identify/identify-plan.ts';
import { identifyInput } from '../helpers/identify-input.ts';
import { createJsonPool, inlineJsonWork } from '../../platform/json-pool.ts';
import { TRACK_MESSAGES } from '../../events/track.ts';

const track = (fields: Record<string, unknown> = {}) =>
  JSON.stringify({ type: 'track', messageId: 'm', event: 'E', userId: 'u', timestamp: '2024-01-01T00:00:00Z', ...fields });

test('decodeTrack: JSON first, then the stored size, then the fields, as check 6 orders them', (t) => {
  t.deepEqual(decodeTrack(''), { kind: 'notJson' });
  t.deepEqual(decodeTrack('{"type":'), { kind: 'notJson' });
  // Too large wins over invalid fields.
  t.deepEqual(decodeTrack(JSON.stringify({ type: 'nope', properties: { s: '"'.repeat(600_000) } })), { kind: 'tooLarge' });
  t.deepEqual(decodeTrack(track({ type: 'nope' })), { kind: 'invalid', message: TRACK_MESSAGES.invalidType });
  const ok = decodeTrack(track({ properties: { a: [1] }, extra: 1 }));
  t.deepEqual(ok, {
    kind: 'ok',
    track: { type: 'track', messageId: 'm', event: 'E', userId: 'u', anonymousId: null, timestamp: '2024-01-01T00:00:00Z' },
    timestampMs: Date.UTC(2024, 0, 1),
    storedPayload:
      '{"type":"track","messageId":"m","event":"E","userId":"u","anonymousId":null,"timestamp":"2024-01-01T00:00:00Z","properties":{"a":[1]},"context":{},"integrations":{}}',
  });
});

test('decodeIdentify: not JSON, issues, too far ahead, or the input with its traits as text', (t) => {
  const now = Date.UTC(2024, 0, 1);
  t.deepEqual(decodeIdentify('nope', now), { kind: 'notJson' });
  t.is(decodeIdentify('{"traits":{"a":1}}', now).kind, 'invalid');
  t.deepEqual(decodeIdentify('{"userId":"u","traits":{"a":1},"timestamp":"2030-01-01T00:00:00Z"}', now), { kind: 'tooFarAhead' });
  const ok = decodeIdentify('{"userId":" u ","traits":{"email":"A@x.io","b":[ 1 , 2.0 ]}}', now);
  t.is(ok.kind, 'ok');
  if (ok.kind === 'ok') {
    t.is(ok.input.traitsText, '{"email":"A@x.io","b":[1,2]}');
    t.deepEqual(ok.input.addressTraits, { email: 'A@x.io' });
  }
});

test('the pool runs large input on a thread and gives the same answers as inline', async (t) => {
  const pool = createJsonPool(JSON_TASKS, { threads: 1, inlineChars: 1000 });
  t.teardown(() => pool.close());
  const deep = 200_000;
  const body = `{"userId":"u","traits":{"deep":${'['.repeat(deep)}${']'.repeat(deep)}}}`;
  const threaded = await pool.run(decodeIdentify, body, 0);
  t.deepEqual(threaded, await inlineJsonWork.run(decodeIdentify, body, 0));
  t.is(threaded.kind === 'ok' && threaded.input.traitsText.length, body.length - '{"userId":"u","traits":}'.length);
  // Small input stays inline; a task's error rejects its promise, on a thread too.
  t.deepEqual(await pool.run(decodeTrack, 'x'), { kind: 'notJson' });
  t.deepEqual(await pool.run(decodeTrack, 'x'.repeat(2000)), { kind: 'notJson' });
});

// Serial: the other tests of this file run large input inline, on this same event loop.
test.serial('the event loop stays free while a thread parses a 4 MB body nested 2,000,000 levels', async (t) => {
  const pool = createJsonPool(JSON_TASKS, { threads: 1 });
  t.teardown(() => pool.close());
  await pool.run(decodeTrack, 'x'.repeat(20_000)); // the thread is started
  const depth = 2_000_000;
  const body = `{"userId":"u","traits":{"deep":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
  let ticks = 0;
  let longest = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
    ticks++;
  }, 5);
  const result = await pool.run(decodeIdentify, body, 0);
  clearInterval(timer);
  t.is(result.kind, 'ok');
  t.true(ticks > 20, `${ticks} timer ticks while the thread worked`);
  // Inline, this body holds the event loop for 1–3 s; the bound leaves room for a 2-core machine
  // busy with the rest of the suite (a 0.4 s gap was seen then).
  t.true(longest < 1000, `longest event-loop gap ${longest.toFixed(0)} ms`);
});

test('work inside an Identify transaction goes before bodies waiting to be decoded', async (t) => {
  const pool = createJsonPool(JSON_TASKS, { threads: 1, inlineChars: 1000 });
  t.teardown(() => pool.close());
  const body = `{"userId":"u","traits":{"deep":${'['.repeat(300_000)}${']'.repeat(300_000)}}}`;
  const finished: string[] = [];
  const decodes = [1, 2, 3].map((i) => pool.run(decodeIdentify, body, 0).then(() => finished.push(`decode ${i}`)));
  const traitsText = `{"a":"${'x'.repeat(2000)}"}`;
  const call = toIdentifyCall({ id: 'env', features: [] }, identifyInput('u', { a: 'x'.repeat(2000) }, { messageId: 'm', timestampMs: 1 }), 1);
  const snapshot = { users: new Map(), profiles: new Map(), priors: new Map(), decisions: new Map() };
  const merge = pool.runFor([traitsText], planIdentifyBatch, [call], snapshot, 1).then(() => finished.push('merge'));
  await Promise.all([...decodes, merge]);
  // The first decode had already started; the merge overtakes the other two.
  t.deepEqual(finished, ['decode 1', 'merge', 'decode 2', 'decode 3']);
});

test('decodeIdentify: issues come back as JSON text, however many', (t) => {
  const result = decodeIdentify(`{"userId":"u","consent":[${'1,'.repeat(99_999)}1]}`, 0);
  t.is(result.kind, 'invalid');
  if (result.kind === 'invalid') {
    const issues = JSON.parse(result.issues);
    t.is(issues.length, 100_000);
    t.deepEqual(issues[99_999].path, ['consent', 99_999]);
  }
});

test('a small body nested deeply is decoded on a thread too; a small shallow one inline', async (t) => {
  const pool = createJsonPool(JSON_TASKS, { threads: 1 });
  t.teardown(() => pool.close());
  // 16 KB nested 8,000 levels: ~45 ms inline (JSON.stringify's RangeError at the stack limit).
  const deep = `{"userId":"u","traits":{"d":${'['.repeat(8000)}${']'.repeat(8000)}}}`;
  const shallow = `{"userId":"u","traits":{"d":[${'1,'.repeat(5000)}1]}}`;
  t.is((await pool.run(decodeIdentify, shallow, 0)).kind, 'ok');
  t.is(pool.threaded(), 0);
  t.is((await pool.run(decodeIdentify, deep, 0)).kind, 'ok');
  t.is(pool.threaded(), 1);
  // 1,000 levels (the object and 999 arrays) stay inline.
  t.is((await pool.run(decodeTrack, `{"d":${'['.repeat(999)}${']'.repeat(999)}}`)).kind, 'invalid');
  t.is(pool.threaded(), 1);
});
