// POST /api/track/{org_slug} over HTTP: every 400 row of the spec, the timestamp forms,
// the 202 body, what the worker stores, and the 413 size measure.
import http from 'node:http';
import test from 'ava';
import { limitConcurrency } from '../helpers/throttle.ts';
import type { ExecutionContext } from 'ava';
import { MESSAGES } from '../../gateway/errors.ts';
import { TRACK_MESSAGES } from '../../events/track.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { IGNORED_FIELDS, request, trackBody, type Reply } from '../helpers/http.ts';
import { gatewayInProcess, harnessWithGatewayAndWorker, workerInProcess } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: Awaited<ReturnType<typeof gatewayInProcess>>;
let worker: Awaited<ReturnType<typeof workerInProcess>>;

limitConcurrency(test, 12);

harnessWithGatewayAndWorker(test, (...opened) => {
  [h, gateway, worker] = opened;
});

const { expectedString, expectedObject } = TRACK_MESSAGES;

/** POST a body (an object is sent as JSON, a string as is) with the tenant's key. */
function post(tenant: Tenant, body: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  return request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key, ...headers }, body });
}

function assertAccepted(t: ExecutionContext, reply: Reply, messageId: string): void {
  t.is(reply.status, 202, reply.text);
  t.deepEqual(reply.json, { message_id: messageId, status: 'accepted' });
}

/** The stored row once the worker has written it (null if it never appears). */
function stored(tenant: Tenant, messageId: string, timeoutMs = 15_000) {
  return eventually(() => h.db.event.findFirst({ where: { environmentId: tenant.environmentId, messageId } }), { timeoutMs });
}

/** Accept `body`, wait for the stored row and return it with its payload parsed. */
async function acceptAndStore(t: ExecutionContext, body: Record<string, unknown>) {
  const tenant = await newTenant(h);
  const messageId = body.messageId as string;
  assertAccepted(t, await post(tenant, body), messageId);
  const row = await stored(tenant, messageId);
  if (!row) throw new Error(`event ${messageId} was not stored`);
  return { tenant, row, payload: JSON.parse(row.payload) as Record<string, unknown> };
}

// --- 400: every row of the spec's Track table, one line each ---

const rejects = test.macro({
  async exec(t, body: unknown, error: string) {
    const tenant = await newTenant(h);
    const reply = await post(tenant, body);
    t.is(reply.status, 400, reply.text);
    t.deepEqual(reply.json, { error });
  },
  title: (provided = '', _body: unknown, error: string) => `400 ${provided} -> ${error}`,
});

test('body not JSON', rejects, '{"type":"track",', MESSAGES.invalidJson);
test('body garbage', rejects, 'hello', MESSAGES.invalidJson);
test('body empty', rejects, '', MESSAGES.invalidJson);
test('body an array', rejects, [trackBody()], expectedObject.array);
test('body a {batch} envelope', rejects, { batch: [trackBody()] }, TRACK_MESSAGES.invalidType);
test('type missing', rejects, trackBody({ type: undefined }), TRACK_MESSAGES.invalidType);
test('type identify', rejects, trackBody({ type: 'identify' }), TRACK_MESSAGES.invalidType);
test('type Track (case)', rejects, trackBody({ type: 'Track' }), TRACK_MESSAGES.invalidType);
test('messageId missing', rejects, trackBody({ messageId: undefined }), TRACK_MESSAGES.required);
test('messageId empty', rejects, trackBody({ messageId: '' }), TRACK_MESSAGES.emptyString);
test('messageId a number', rejects, trackBody({ messageId: 123 }), expectedString.number);
test('event missing', rejects, trackBody({ event: undefined }), TRACK_MESSAGES.required);
test('event empty', rejects, trackBody({ event: '' }), TRACK_MESSAGES.emptyString);
test('event a number', rejects, trackBody({ event: 7 }), expectedString.number);
test('event profile_fields_changed (reserved)', rejects, trackBody({ event: 'profile_fields_changed' }), TRACK_MESSAGES.reservedEvent);
test('event subscription_changed (reserved)', rejects, trackBody({ event: 'subscription_changed' }), TRACK_MESSAGES.reservedEvent);
test('timestamp missing', rejects, trackBody({ timestamp: undefined }), TRACK_MESSAGES.required);
test('timestamp bad format', rejects, trackBody({ timestamp: 'yesterday' }), TRACK_MESSAGES.invalidDatetime);
test('timestamp a number', rejects, trackBody({ timestamp: 1714557600000 }), expectedString.number);
test('userId a number', rejects, trackBody({ userId: 42 }), expectedString.number);
test('anonymousId a number', rejects, trackBody({ anonymousId: 42 }), expectedString.number);
test('properties null', rejects, trackBody({ properties: null }), expectedObject.null);
test('properties an array', rejects, trackBody({ properties: [1] }), expectedObject.array);
test('properties a string', rejects, trackBody({ properties: 'x' }), expectedObject.string);
test('context null', rejects, trackBody({ context: null }), expectedObject.null);
test('context an array', rejects, trackBody({ context: [] }), expectedObject.array);
test('integrations null', rejects, trackBody({ integrations: null }), expectedObject.null);
test('integrations an array', rejects, trackBody({ integrations: [] }), expectedObject.array);
test('no userId and no anonymousId', rejects, trackBody({ userId: undefined }), TRACK_MESSAGES.idRequired);
test('userId and anonymousId null', rejects, trackBody({ userId: null, anonymousId: null }), TRACK_MESSAGES.idRequired);
test('userId "" and no anonymousId', rejects, trackBody({ userId: '' }), TRACK_MESSAGES.idRequired);
test('userId "   " and no anonymousId', rejects, trackBody({ userId: '   ' }), TRACK_MESSAGES.idRequired);
test('userId "" and anonymousId "\\t "', rejects, trackBody({ userId: '', anonymousId: '\t ' }), TRACK_MESSAGES.idRequired);

// Field order: type, messageId, userId, anonymousId, event, timestamp, context, integrations, properties, ids.
test('order: bad type and bad messageId', rejects, trackBody({ type: 'identify', messageId: 1 }), TRACK_MESSAGES.invalidType);
test('order: empty messageId and bad userId', rejects, trackBody({ messageId: '', userId: 1 }), TRACK_MESSAGES.emptyString);
test('order: bad userId and bad event', rejects, trackBody({ userId: 1, event: '' }), expectedString.number);
test('order: bad anonymousId and missing event', rejects, trackBody({ anonymousId: 1, event: undefined }), expectedString.number);
test('order: missing event and bad timestamp', rejects, trackBody({ event: undefined, timestamp: 'soon' }), TRACK_MESSAGES.required);
test('order: reserved event and bad timestamp', rejects, trackBody({ event: 'subscription_changed', timestamp: 'soon' }), TRACK_MESSAGES.reservedEvent);
test('order: bad timestamp and null context', rejects, trackBody({ timestamp: '2024-05-01', context: null }), TRACK_MESSAGES.invalidDatetime);
test('order: null context and array properties', rejects, trackBody({ context: null, properties: [] }), expectedObject.null);
test('order: null context and array integrations', rejects, trackBody({ context: null, integrations: [] }), expectedObject.null);
test('order: array integrations and null properties', rejects, trackBody({ integrations: [], properties: null }), expectedObject.array);
test('order: null properties and no ids', rejects, trackBody({ properties: null, userId: undefined }), expectedObject.null);

// --- Timestamps: the shared format over HTTP (Track has no time bounds) ---

const timestampAccepted = test.macro({
  async exec(t, timestamp: string, instant: string) {
    const { row, payload } = await acceptAndStore(t, trackBody({ timestamp }));
    t.is(row.timestamp.toISOString(), instant);
    t.is(payload.timestamp, timestamp);
  },
  title: (provided = '', timestamp: string) => `timestamp ${timestamp} is accepted${provided ? ` (${provided})` : ''}`,
});

test(timestampAccepted, '2024-05-01T10:00:00Z', '2024-05-01T10:00:00.000Z');
test(timestampAccepted, '2024-05-01T10:00:00.5Z', '2024-05-01T10:00:00.500Z');
test(timestampAccepted, '2024-05-01T10:00:00.123Z', '2024-05-01T10:00:00.123Z');
test(timestampAccepted, '2024-05-01T10:00:00.123456Z', '2024-05-01T10:00:00.123Z');
test(timestampAccepted, '2024-05-01T10:00:00.123456789Z', '2024-05-01T10:00:00.123Z');
test(timestampAccepted, '2024-05-01T12:00:00+02:00', '2024-05-01T10:00:00.000Z');
test(timestampAccepted, '2024-05-01T12:00:00+0200', '2024-05-01T10:00:00.000Z');
test(timestampAccepted, '2024-05-01T04:30:00-05:30', '2024-05-01T10:00:00.000Z');
test('no seconds', timestampAccepted, '2024-05-01T10:00Z', '2024-05-01T10:00:00.000Z');
test('leap day', timestampAccepted, '2024-02-29T10:00:00Z', '2024-02-29T10:00:00.000Z');
test('far past', timestampAccepted, '1900-01-01T00:00:00Z', '1900-01-01T00:00:00.000Z');
test('far future', timestampAccepted, '2999-12-31T23:59:59Z', '2999-12-31T23:59:59.000Z');

const timestampRejected = test.macro({
  async exec(t, timestamp: unknown, error: string) {
    const tenant = await newTenant(h);
    const reply = await post(tenant, trackBody({ timestamp }));
    t.is(reply.status, 400, reply.text);
    t.deepEqual(reply.json, { error });
  },
  title: (provided = '', timestamp: unknown) => `timestamp ${JSON.stringify(timestamp)} is rejected (${provided})`,
});

test('no time zone', timestampRejected, '2024-05-01T10:00:00', TRACK_MESSAGES.invalidDatetime);
test('space for T', timestampRejected, '2024-05-01 10:00:00Z', TRACK_MESSAGES.invalidDatetime);
test('hour-only offset', timestampRejected, '2024-05-01T10:00:00+02', TRACK_MESSAGES.invalidDatetime);
test('date alone', timestampRejected, '2024-05-01', TRACK_MESSAGES.invalidDatetime);
test('lowercase t', timestampRejected, '2024-05-01t10:00:00Z', TRACK_MESSAGES.invalidDatetime);
test('lowercase z', timestampRejected, '2024-05-01T10:00:00z', TRACK_MESSAGES.invalidDatetime);
test('February 30', timestampRejected, '2024-02-30T10:00:00Z', TRACK_MESSAGES.invalidDatetime);
test('February 29 of a common year', timestampRejected, '2023-02-29T10:00:00Z', TRACK_MESSAGES.invalidDatetime);
test('epoch milliseconds', timestampRejected, 1714557600000, expectedString.number);
test('epoch milliseconds as a string', timestampRejected, '1714557600000', TRACK_MESSAGES.invalidDatetime);

// --- 202 and what is accepted ---

test('202 body is exactly {message_id, status} echoing messageId', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({ messageId: 'Order-42 ✓' });
  const reply = await post(tenant, body);
  assertAccepted(t, reply, 'Order-42 ✓');
  t.regex(reply.headers.get('content-type') ?? '', /^application\/json\b/);
});

test('a whitespace-only messageId passes and is kept as sent', async (t) => {
  const { row, payload } = await acceptAndStore(t, trackBody({ messageId: '   ' }));
  t.is(row.messageId, '   ');
  t.is(payload.messageId, '   ');
});

test('unknown top-level fields are ignored', async (t) => {
  const body = trackBody(IGNORED_FIELDS);
  const { payload } = await acceptAndStore(t, body);
  for (const field of Object.keys(IGNORED_FIELDS)) {
    t.false(field in payload, field);
  }
});

test('Content-Type text/plain is still parsed as JSON', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody();
  assertAccepted(t, await post(tenant, JSON.stringify(body), { 'content-type': 'text/plain' }), body.messageId as string);
});

test('no Content-Type is still parsed as JSON', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody();
  const reply = await rawPost(`/api/track/${tenant.slug}`, { 'x-api-key': tenant.key }, Buffer.from(JSON.stringify(body)));
  t.is(reply.status, 202, reply.text);
  t.deepEqual(JSON.parse(reply.text), { message_id: body.messageId, status: 'accepted' });
});

test('an anonymous-only event with userId null is accepted', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({ userId: null, anonymousId: 'anon-1' });
  assertAccepted(t, await post(tenant, body), body.messageId as string);
});

// --- What the worker stores ---

test('stored event: userId exactly as sent, defaults {}, processed, drives journeys', async (t) => {
  const { row, payload } = await acceptAndStore(t, trackBody({ userId: '  padded  ' }));
  t.is(row.userId, '  padded  ');
  t.is(payload.userId, '  padded  ');
  t.is(row.anonymousId, null);
  t.deepEqual(payload.properties, {});
  t.deepEqual(payload.context, {});
  t.deepEqual(payload.integrations, {});
  t.is(row.status, 'processed');
  t.is(row.event, 'Signed Up');
  t.true(row.withinLimits);
  t.is(row.limitReason, null);
  t.true(row.drivesJourneys);
});

test('stored event: properties, context and integrations are saved', async (t) => {
  const properties = { plan: 'pro', amount: 12.5, tags: ['a', 'b'], nested: { deep: true }, none: null };
  const context = { ip: '203.0.113.9', library: { name: 'analytics-node', version: '6.0.0' } };
  const integrations = { All: false, Mixpanel: true };
  const { payload } = await acceptAndStore(t, trackBody({ properties, context, integrations }));
  t.deepEqual(payload.properties, properties);
  t.deepEqual(payload.context, context);
  t.deepEqual(payload.integrations, integrations);
});

test('stored event: anonymous-only never drives journeys', async (t) => {
  const { row } = await acceptAndStore(t, trackBody({ userId: undefined, anonymousId: 'anon-7' }));
  t.is(row.userId, null);
  t.is(row.anonymousId, 'anon-7');
  t.is(row.status, 'processed');
  t.true(row.withinLimits);
  t.false(row.drivesJourneys);
});

test('stored event: a whitespace userId next to an anonymousId drives no journey', async (t) => {
  const { row } = await acceptAndStore(t, trackBody({ userId: '   ', anonymousId: 'anon-8' }));
  t.is(row.userId, '   ');
  t.false(row.drivesJourneys);
});

test('stored event: a null character in a property is outside the journey limits', async (t) => {
  const { row, payload } = await acceptAndStore(t, trackBody({ properties: { note: 'a\u0000b' } }));
  t.is(row.status, 'processed');
  t.false(row.withinLimits);
  t.is(row.limitReason, 'null_character');
  t.false(row.drivesJourneys);
  t.deepEqual(payload.properties, { note: 'a\u0000b' });
});

test('stored event: properties over 128 KB are outside the journey limits', async (t) => {
  const { row } = await acceptAndStore(t, trackBody({ properties: { blob: 'x'.repeat(140 * 1024) } }));
  t.is(row.status, 'processed');
  t.false(row.withinLimits);
  t.is(row.limitReason, 'too_large');
  t.false(row.drivesJourneys);
});

test('the same event sent twice: both 202, one stored row', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({ properties: { n: 1 } });
  const messageId = body.messageId as string;
  const [first, second] = await Promise.all([post(tenant, body), post(tenant, body)]);
  assertAccepted(t, first, messageId);
  assertAccepted(t, second, messageId);
  t.truthy(await stored(tenant, messageId));
  // A later repeat (here with other properties) is the same event too.
  assertAccepted(t, await post(tenant, { ...body, properties: { n: 2 } }), messageId);
  await sleep(500);
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId } });
  t.is(rows.length, 1);
  t.deepEqual(JSON.parse(rows[0].payload).properties, { n: 1 });
});

// --- 413 ---

test('413: quote-heavy ~700 KB body is too large, while letters of the same raw size are accepted', async (t) => {
  const tenant = await newTenant(h);
  const quotes = trackBody({ messageId: 'size-q', properties: { q: '"'.repeat(350_000) } });
  const letters = trackBody({ messageId: 'size-l', properties: { q: 'a'.repeat(700_000) } });
  const quotesRaw = JSON.stringify(quotes);
  const lettersRaw = JSON.stringify(letters);
  t.is(Buffer.byteLength(quotesRaw), Buffer.byteLength(lettersRaw));
  t.true(Buffer.byteLength(quotesRaw) > 700_000 && Buffer.byteLength(quotesRaw) < 710_000);

  const tooLarge = await post(tenant, quotesRaw);
  t.is(tooLarge.status, 413, tooLarge.text);
  t.deepEqual(tooLarge.json, { error: MESSAGES.trackTooLarge });
  assertAccepted(t, await post(tenant, lettersRaw), 'size-l');
});

test('413: letters over the ~1 MB measure', async (t) => {
  const tenant = await newTenant(h);
  const reply = await post(tenant, trackBody({ properties: { q: 'a'.repeat(1_100_000) } }));
  t.is(reply.status, 413, reply.text);
  t.deepEqual(reply.json, { error: MESSAGES.trackTooLarge });
});

test('413 before parsing: 2 MB of unterminated JSON is too large, not invalid JSON', async (t) => {
  const tenant = await newTenant(h);
  const raw = '{"type":"track","properties":{"q":"' + 'a'.repeat(2 * 1024 * 1024);
  const reply = await post(tenant, raw);
  t.is(reply.status, 413, reply.text);
  t.deepEqual(reply.json, { error: MESSAGES.trackTooLarge });
  // One byte over the limit is too large whatever it holds; a body within it keeps the measure and its messages.
  const over = await post(tenant, '{' + ' '.repeat(1_048_576 - 2) + '}!');
  t.is(over.status, 413, over.text);
  const within = await post(tenant, '{' + ' '.repeat(1_048_576 - 3) + '}!');
  t.is(within.status, 400, within.text);
  t.deepEqual(within.json, { error: MESSAGES.invalidJson });
});

test('413: a 20 MB upload is refused at once, without reading it', async (t) => {
  const tenant = await newTenant(h);
  const total = 20 * 1024 * 1024;
  const result = await streamUpload(`/api/track/${tenant.slug}`, { 'x-api-key': tenant.key, 'content-type': 'application/json' }, total);
  t.is(result.status, 413, result.text);
  t.deepEqual(JSON.parse(result.text), { error: MESSAGES.trackTooLarge });
  t.true(result.written < total, `wrote ${result.written} of ${total} bytes before the answer`);
  // The proof is the line above (answered before the upload was done); this only rules out a stall.
  t.true(result.ms < 8000, `answered after ${result.ms} ms`);
});

// --- node:http, for what fetch cannot do: no Content-Type, and a streamed upload ---

function rawPost(path: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(gateway.url + path, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/**
 * Announce `total` bytes with Content-Length and stream them in 64 KB chunks, with
 * backpressure, until the response arrives; report how much was written by then.
 */
function streamUpload(path: string, headers: Record<string, string>, total: number): Promise<{ status: number; text: string; written: number; ms: number }> {
  const started = performance.now();
  const chunk = Buffer.alloc(64 * 1024, 'a');
  return new Promise((resolve, reject) => {
    let written = 0;
    let answered = false;
    const req = http.request(gateway.url + path, { method: 'POST', headers: { ...headers, 'content-length': String(total) } });
    req.on('response', (res) => {
      answered = true;
      const writtenAtAnswer = written;
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, text: Buffer.concat(parts).toString(), written: writtenAtAnswer, ms: performance.now() - started });
        req.destroy();
      });
    });
    // The server closes the connection after answering; writes after that may fail.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    const pump = () => {
      while (!answered && written < total) {
        const n = Math.min(chunk.length, total - written);
        written += n;
        if (!req.write(n === chunk.length ? chunk : chunk.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    pump();
  });
}
