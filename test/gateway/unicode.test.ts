// Bytes are checked, never replaced (issue 23), over real HTTP with a real worker: a body that
// is not UTF-8 is the contract's not-JSON error on both endpoints (plain and Content-Encoding
// bodies), so two events that differ in one invalid byte are never merged into one; valid
// multi-byte text is stored as sent; identifiers with an unpaired surrogate are refused
// (docs/decisions.md) while free values keep them; and non-UTF-8 in the URL or in headers gets a
// spec answer, never a 500 or another user's data.
import net from 'node:net';
import { gzipSync } from 'node:zlib';
import test from 'ava';
import { eventsGet } from '../../cli/commands/events.ts';
import { notJsonIssues } from '../../identify/validation.ts';
import { NOT_WELL_FORMED_MESSAGE } from '../../platform/validation/well-formed.ts';
import { eventually } from '../helpers/eventually.ts';
import { rawExchange, request, trackBody, type Reply } from '../helpers/http.ts';
import { harnessWithGatewayAndWorker, type InProcessGateway } from '../helpers/processes.ts';
import { newTenant, type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;

harnessWithGatewayAndWorker(test, (...opened) => ([h, gateway] = opened), { env: { WORKER_BATCH_WAIT_MS: '2' }, ownPool: true, emptied: true });

const NOT_JSON_TRACK = { error: 'Invalid JSON' };
const NOT_JSON_IDENTIFY = { error: 'Invalid Identify call', issues: notJsonIssues() };

const post = (tenant: Tenant, api: 'track' | 'identify', body: string | Buffer | object, headers: Record<string, string> = {}): Promise<Reply> =>
  request(gateway.url, `/api/${api}/${tenant.slug}`, { headers: { 'x-api-key': tenant.key, ...headers }, body });

const getProfile = (tenant: Tenant, encodedUserId: string) =>
  request(gateway.url, `/api/profiles/${tenant.slug}/${encodedUserId}`, { method: 'GET', headers: { 'x-api-key': tenant.key } });

/** JSON text with raw bytes spliced in where `\u0000` placeholders stand (bytes no JS string can hold as UTF-8). */
function withBytes(text: string, ...bytes: number[][]): Buffer {
  const parts = text.split('\u0000');
  return Buffer.concat(parts.flatMap((p, i) => (i < bytes.length ? [Buffer.from(p), Buffer.from(bytes[i])] : [Buffer.from(p)])));
}

const trackWithMessageId = (prefix: string, bytes: number[]) =>
  withBytes(`{"type":"track","messageId":"${prefix}\u0000","event":"E","userId":"u","timestamp":"2024-05-01T10:00:00Z"}`, bytes);

/** The stored event once the worker has processed it. */
const stored = (tenant: Tenant, messageId: string) =>
  eventually(
    async () => {
      const got = (await eventsGet(h.operator, [tenant.slug, '--', messageId]).catch(() => null)) as { status: string; event: Record<string, unknown> } | null;
      return got?.status === 'processed' ? got : null;
    },
    { timeoutMs: 30_000 },
  );

/** The tenant's stored events once `sentinel` (sent last) is stored: every earlier 202 is stored by then. */
async function eventsAfter(t: import('ava').ExecutionContext, tenant: Tenant, sentinel = `sentinel-${Date.now()}`): Promise<string[]> {
  const reply = await post(tenant, 'track', trackBody({ messageId: sentinel }));
  t.is(reply.status, 202, reply.text);
  t.truthy(await stored(tenant, sentinel), 'the sentinel is stored');
  const rows = await h.db.event.findMany({ where: { environmentId: tenant.environmentId }, select: { messageId: true } });
  return rows.map((r) => r.messageId).filter((m) => m !== sentinel);
}

// ---- bodies that are not UTF-8 ------------------------------------------------------------

test('Track: two messageIds that differ in one invalid byte are both 400 Invalid JSON; nothing stored, never merged', async (t) => {
  const tenant = await newTenant(h);
  for (const byte of [0xff, 0xfe]) {
    const reply = await post(tenant, 'track', trackWithMessageId('utf-', [byte]));
    t.is(reply.status, 400, reply.text);
    t.deepEqual(reply.json, NOT_JSON_TRACK);
  }
  t.deepEqual(await eventsAfter(t, tenant), []);
});

test('Track: every kind of invalid UTF-8 is refused, wherever it is in the body', async (t) => {
  const tenant = await newTenant(h);
  const invalid = [
    [0x80], // a continuation byte alone
    [0xc3], // a lead byte without its continuation
    [0xc0, 0xaf], // an overlong encoding of '/'
    [0xed, 0xa0, 0x80], // an encoded surrogate (CESU-8)
    [0xf4, 0x90, 0x80, 0x80], // past U+10FFFF
    [0xf0, 0x9f, 0x98], // a 4-byte sequence cut short
  ];
  for (const bytes of invalid) {
    for (const body of [
      trackWithMessageId('bad-', bytes),
      withBytes(`{"type":"track","messageId":"m-${bytes.join('-')}","event":"E\u0000","userId":"u","timestamp":"2024-05-01T10:00:00Z"}`, bytes),
      withBytes(
        `{"type":"track","messageId":"p-${bytes.join('-')}","event":"E","userId":"u","timestamp":"2024-05-01T10:00:00Z","properties":{"a":"\u0000"}}`,
        bytes,
      ),
      withBytes(`\u0000{"type":"track","messageId":"lead-${bytes.join('-')}","event":"E","userId":"u","timestamp":"2024-05-01T10:00:00Z"}`, bytes),
    ]) {
      const reply = await post(tenant, 'track', body);
      t.is(reply.status, 400, `${bytes}: ${reply.text}`);
      t.deepEqual(reply.json, NOT_JSON_TRACK);
    }
  }
  t.deepEqual(await eventsAfter(t, tenant), []);
});

test('Identify: a body that is not UTF-8 is the not-JSON issue; no profile is made', async (t) => {
  const tenant = await newTenant(h);
  for (const byte of [0xff, 0xfe]) {
    for (const body of [
      withBytes('{"userId":"u-\u0000","traits":{"a":1}}', [byte]),
      withBytes('{"userId":"u","traits":{"a":"\u0000"}}', [byte]),
      withBytes('{"userId":"u","messageId":"m-\u0000","traits":{"a":1}}', [byte]),
    ]) {
      const reply = await post(tenant, 'identify', body);
      t.is(reply.status, 400, reply.text);
      t.deepEqual(reply.json, NOT_JSON_IDENTIFY);
    }
  }
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), 0);
});

test('a gzip body is checked the same way after inflating (the Content-Encoding path)', async (t) => {
  const tenant = await newTenant(h);
  const gzip = { 'content-encoding': 'gzip' };
  for (const byte of [0xff, 0xfe]) {
    const track = await post(tenant, 'track', gzipSync(trackWithMessageId('gz-', [byte])), gzip);
    t.is(track.status, 400, track.text);
    t.deepEqual(track.json, NOT_JSON_TRACK);
    const identify = await post(tenant, 'identify', gzipSync(withBytes('{"userId":"gz-\u0000","traits":{"a":1}}', [byte])), gzip);
    t.is(identify.status, 400, identify.text);
    t.deepEqual(identify.json, NOT_JSON_IDENTIFY);
  }
  // Valid multi-byte text inflates to itself, and a leading BOM is dropped as on the plain path.
  const body = trackBody({ messageId: `gz-ü-東京-😀-${Date.now()}`, properties: { note: 'é漢😀' } });
  const bom = Buffer.from([0xef, 0xbb, 0xbf]);
  const reply = await post(tenant, 'track', gzipSync(Buffer.concat([bom, Buffer.from(JSON.stringify(body))])), gzip);
  t.is(reply.status, 202, reply.text);
  t.is(reply.json.message_id, body.messageId);
  t.deepEqual((await stored(tenant, body.messageId as string))?.event.properties, { note: 'é漢😀' });
  t.is((await eventsAfter(t, tenant)).length, 1);
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), 0);
});

// ---- valid multi-byte text ----------------------------------------------------------------

test('Track: valid multi-byte UTF-8 is accepted and stored exactly as sent, also split mid-character across packets', async (t) => {
  const tenant = await newTenant(h);
  const body = trackBody({
    messageId: `ü-東京-😀-${Date.now()}`,
    userId: 'Zoë 🚀',
    anonymousId: 'анон',
    event: 'Bestellung abgeschlossen — 注文',
    properties: { note: 'é漢字😀', ключ: 'значение', '\u2028': '\u00a0', nested: { '𝄞': ['ß', '\ufeff'] } },
    context: { locale: 'ja-JP', title: '日本語' },
  });
  const bytes = Buffer.from(JSON.stringify(body));
  const cut = bytes.indexOf(Buffer.from('😀')) + 2; // inside the 4 bytes of U+1F600
  const { port } = new URL(gateway.url);
  const head = `POST /api/track/${tenant.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\nConnection: close\r\n\r\n`;
  const answer = await new Promise<string>((resolve) => {
    let out = '';
    const socket = net.connect(Number(port), '127.0.0.1', () => {
      socket.write(Buffer.concat([Buffer.from(head), bytes.subarray(0, cut)]));
      setTimeout(() => socket.write(bytes.subarray(cut)), 100);
    });
    socket.on('data', (c: Buffer) => (out += c.toString('utf8')));
    socket.on('close', () => resolve(out));
  });
  t.regex(answer, /^HTTP\/1\.1 202 /);
  t.true(answer.endsWith(JSON.stringify({ message_id: body.messageId, status: 'accepted' })), answer);
  const event = (await stored(tenant, body.messageId as string))?.event;
  for (const field of ['messageId', 'userId', 'anonymousId', 'event', 'properties', 'context'] as const) t.deepEqual(event?.[field], body[field], field);
  // Byte for byte: the stored properties serialize to the UTF-8 that was sent.
  t.true(Buffer.from(JSON.stringify(event?.properties)).equals(Buffer.from(JSON.stringify(body.properties))));
});

test('Identify: valid multi-byte UTF-8 is stored and read back exactly', async (t) => {
  const tenant = await newTenant(h);
  const userId = `Zoë-東京-😀-${Date.now()}`;
  const traits = { name: 'Zoë Ñúñez', city: '東京', mood: '😀', '𝄞': 'ß' };
  const reply = await post(tenant, 'identify', { userId, messageId: 'メッセージ-1', traits });
  t.is(reply.status, 200, reply.text);
  t.is(reply.json.messageId, 'メッセージ-1');
  const profile = await getProfile(tenant, encodeURIComponent(userId));
  t.is(profile.status, 200, profile.text);
  t.is(profile.json.user_id, userId);
  t.deepEqual(profile.json.fields, traits);
});

// ---- unpaired surrogates ------------------------------------------------------------------

const TS = '"timestamp":"2024-05-01T10:00:00Z"';

test('Track: an identifier with an unpaired surrogate is 400 with the first problem, in the spec field order; nothing stored', async (t) => {
  const tenant = await newTenant(h);
  const cases = [
    `{"type":"track","messageId":"ls-\\ud800","event":"E","userId":"u",${TS}}`,
    `{"type":"track","messageId":"\\udfff","event":"E","userId":"u",${TS}}`,
    `{"type":"track","messageId":"ls-2","event":"E","userId":"u-\\udc00",${TS}}`,
    `{"type":"track","messageId":"ls-3","event":"E","userId":null,"anonymousId":"\\ud83d",${TS}}`,
    `{"type":"track","messageId":"ls-4","event":"E","userId":"\\ud800","anonymousId":"a",${TS}}`,
    `{"type":"track","messageId":"ls-5","event":"E","userId":"u","anonymousId":"\\ude00\\ud83d",${TS}}`,
    // The first problem wins: the surrogate in userId comes before the missing event and timestamp.
    `{"type":"track","messageId":"ls-6","userId":"\\ud800"}`,
  ];
  for (const body of cases) {
    const reply = await post(tenant, 'track', body);
    t.is(reply.status, 400, body);
    t.deepEqual(reply.json, { error: NOT_WELL_FORMED_MESSAGE }, body);
  }
  // Fields before the IDs still come first.
  const earlier = await post(tenant, 'track', `{"type":"track","messageId":"","userId":"\\ud800",${TS}}`);
  t.deepEqual(earlier.json, { error: 'String must contain at least 1 character(s)' });
  t.deepEqual(await eventsAfter(t, tenant), []);
});

test('Track: free values keep an unpaired surrogate and are stored exactly (event name, properties, context)', async (t) => {
  const tenant = await newTenant(h);
  const body = `{"type":"track","messageId":"free-1","event":"E\\ud800","userId":"u😀",${TS},"properties":{"\\udfff":"\\ud800x","pair":"\\ud83d\\ude00"},"context":{"a":"\\udc00"}}`;
  const reply = await post(tenant, 'track', body);
  t.is(reply.status, 202, reply.text);
  const event = (await stored(tenant, 'free-1'))?.event;
  const sent = JSON.parse(body);
  for (const field of ['event', 'userId', 'properties', 'context']) t.deepEqual(event?.[field], sent[field], field);
});

test('Identify: userId or messageId with an unpaired surrogate is an issue at its path; nothing applied', async (t) => {
  const tenant = await newTenant(h);
  const issue = (path: string[]) => ({ code: 'invalid_string', path, message: NOT_WELL_FORMED_MESSAGE });
  const cases: [string, object[]][] = [
    ['{"userId":"u\\ud800","traits":{"a":1}}', [issue(['userId'])]],
    ['{"userId":"  \\udfff  ","traits":{"a":1}}', [issue(['userId'])]],
    ['{"userId":"u","messageId":"m-\\udc00","traits":{"a":1}}', [issue(['messageId'])]],
    [
      '{"userId":"\\ud800","messageId":"\\udfff","traits":null}',
      [
        issue(['userId']),
        { code: 'invalid_type', expected: 'object', received: 'null', path: ['traits'], message: 'Expected object, received null' },
        issue(['messageId']),
      ],
    ],
  ];
  for (const [body, issues] of cases) {
    const reply = await post(tenant, 'identify', body);
    t.is(reply.status, 400, body);
    t.deepEqual(reply.json, { error: 'Invalid Identify call', issues }, body);
  }
  t.is(await h.db.profile.count({ where: { environmentId: tenant.environmentId } }), 0);
  t.is(await h.db.identifyMessage.count({ where: { environmentId: tenant.environmentId } }), 0);
});

test('Identify: trait keys and values, address traits and a proofRef keep an unpaired surrogate and read back exactly', async (t) => {
  const tenant = await newTenant(h);
  const body =
    '{"userId":"free-traits","traits":{"\\ud800":"\\udfff","email":"a\\ud800@example.com","phone":"\\udc00","pair":"\\ud83d\\ude00"},' +
    '"consent":[{"channel":"email","status":"granted","basis":"consent","proofRef":"form-\\ud800"}]}';
  const reply = await post(tenant, 'identify', body);
  t.is(reply.status, 200, reply.text);
  const profile = await getProfile(tenant, 'free-traits');
  t.is(profile.status, 200, profile.text);
  t.deepEqual(profile.json.fields, JSON.parse(body).traits);
});

// ---- the URL and the headers --------------------------------------------------------------

test('Profiles: a user ID segment that does not decode to UTF-8 is 404 Profile not found, never another user', async (t) => {
  const tenant = await newTenant(h);
  // Users whose IDs read like the undecodable segments: the router's lenient decoding kept the
  // segment as it was, which named them.
  for (const userId of ['%FF', 'u%FF', '%ED%A0%80']) t.is((await post(tenant, 'identify', { userId, traits: { a: 1 } })).status, 200);
  for (const segment of ['%FF', 'u%FF', '%ED%A0%80', '%C3', '%F0%9F%98']) {
    const reply = await getProfile(tenant, segment);
    t.is(reply.status, 404, `${segment}: ${reply.text}`);
    t.deepEqual(reply.json, { error: 'Profile not found' }, segment);
  }
  // Their own URLs find them.
  for (const userId of ['%FF', 'u%FF', '%ED%A0%80']) {
    const reply = await getProfile(tenant, encodeURIComponent(userId));
    t.is(reply.status, 200, userId);
    t.is(reply.json.user_id, userId);
  }
  // Authentication still comes first.
  const anonymous = await request(gateway.url, `/api/profiles/${tenant.slug}/%FF`, { method: 'GET' });
  t.deepEqual([anonymous.status, anonymous.json], [401, { error: 'Missing API key' }]);
});

test('an org slug that does not decode is 400 Invalid org slug on every endpoint', async (t) => {
  const tenant = await newTenant(h);
  const headers = { 'x-api-key': tenant.key };
  for (const [method, path] of [
    ['POST', '/api/track/%FF'],
    ['POST', '/api/identify/t-%FF'],
    ['GET', '/api/profiles/%ED%A0%80/u'],
  ]) {
    const reply = await request(gateway.url, path, { method, headers, body: method === 'POST' ? trackBody() : undefined });
    t.is(reply.status, 400, path);
    t.deepEqual(reply.json, { error: 'Invalid org slug' }, path);
  }
});

test('header values with bytes that are not UTF-8 get the spec answer (keys are ASCII, so none can match)', async (t) => {
  const tenant = await newTenant(h);
  const body = JSON.stringify(trackBody({ messageId: `hdr-${Date.now()}` }));
  /** A Track request with one header written as raw bytes (latin1: one char per byte). */
  const send = async (header: string) => {
    const length = Buffer.byteLength(body);
    const answer = await rawExchange(
      gateway.url,
      `POST /api/track/${tenant.slug} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${header}\r\nContent-Length: ${length}\r\n\r\n${body}`,
    );
    const [head, text] = answer.received.split('\r\n\r\n');
    return { status: Number(head.split(' ')[1]), json: JSON.parse(text) };
  };
  const latin1 = (bytes: Buffer) => bytes.toString('latin1');
  const key = Buffer.from(tenant.key);
  t.deepEqual(await send(`X-Api-Key: \xff`), { status: 401, json: { error: 'Invalid API key' } });
  t.deepEqual(await send(`X-Api-Key: ${tenant.key}\xff`), { status: 401, json: { error: 'Invalid API key' } });
  t.deepEqual(await send(`Authorization: Bearer ${tenant.key}\xfe`), { status: 401, json: { error: 'Invalid API key' } });
  const basic = Buffer.concat([key, Buffer.from([0xff]), Buffer.from(':')]).toString('base64');
  t.deepEqual(await send(`Authorization: Basic ${basic}`), { status: 401, json: { error: 'Invalid API key' } });
  t.deepEqual(await send(`X-Api-Key: ${tenant.key}\r\nX-Service-Environment: ${latin1(Buffer.from([0x70, 0xff]))}`), {
    status: 400,
    json: { error: 'Invalid environment' },
  });
  // Content-Type is only recommended and never read: the body decides.
  t.deepEqual(await send(`X-Api-Key: ${tenant.key}\r\nContent-Type: application/json; charset=\xff`), {
    status: 202,
    json: { message_id: JSON.parse(body).messageId, status: 'accepted' },
  });
});
