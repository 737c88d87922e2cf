// The body reader (gateway/read-body.ts) over HTTP: what an uncompressed body read directly
// and a compressed one read through co-body answer, and the edges co-body drew (a leading BOM,
// a body shorter than its Content-Length, a chunked body past the limit, an aborted upload).
import { gzipSync, deflateSync } from 'node:zlib';
import test from 'ava';
import { rawExchange, request, trackBody } from '../helpers/http.ts';
import { harnessWithGatewayAndTenant, type InProcessGateway } from '../helpers/processes.ts';
import { type Harness, type Tenant } from '../helpers/services.ts';

let h: Harness;
let gateway: InProcessGateway;
let tenant: Tenant;

harnessWithGatewayAndTenant(test, (...opened) => ([h, gateway, tenant] = opened));

const track = (body: string | Buffer, headers: Record<string, string> = {}) =>
  request(gateway.url, `/api/track/${tenant.slug}`, { body, headers: { 'x-api-key': tenant.key, 'content-type': 'application/json', ...headers } });

/** Raw bytes on a new connection; what the server wrote once it closes or after `waitMs`. */
const raw = async (bytes: string, waitMs = 3000) => (await rawExchange(gateway.url, bytes, waitMs)).received;

test('an uncompressed body is read whole, also when it arrives in several chunks', async (t) => {
  const body = JSON.stringify(trackBody({ properties: { note: 'é'.repeat(40_000) } }));
  const reply = await track(body);
  t.is(reply.status, 202, reply.text);
  t.is(reply.json.message_id, JSON.parse(body).messageId);
});

test('a leading BOM is dropped, as co-body did', async (t) => {
  const body = trackBody();
  const reply = await track(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(body))]));
  t.is(reply.status, 202, reply.text);
  t.is(reply.json.message_id, body.messageId);
});

test('gzip and deflate bodies are inflated (through co-body)', async (t) => {
  for (const [encoding, compress] of [
    ['gzip', gzipSync],
    ['deflate', deflateSync],
  ] as const) {
    const body = trackBody();
    const reply = await track(compress(Buffer.from(JSON.stringify(body))), { 'content-encoding': encoding });
    t.is(reply.status, 202, `${encoding}: ${reply.text}`);
    t.is(reply.json.message_id, body.messageId);
  }
});

test('an unknown Content-Encoding or a corrupt gzip body is 400 Invalid JSON, never a 500', async (t) => {
  for (const [encoding, bytes] of [
    ['zstd', Buffer.from(JSON.stringify(trackBody()))],
    ['gzip', Buffer.from('not gzip at all')],
  ] as const) {
    const reply = await track(bytes, { 'content-encoding': encoding });
    t.is(reply.status, 400, encoding);
    t.deepEqual(reply.json, { error: 'Invalid JSON' });
  }
});

test('a chunked body past the raw limit is 413 Track event is too large and the connection closes', async (t) => {
  const chunk = 'a'.repeat(256 * 1024);
  const chunks = Array.from({ length: 6 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`).join('');
  const answer = await raw(
    `POST /api/track/${tenant.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\nTransfer-Encoding: chunked\r\n\r\n${chunks}0\r\n\r\n`,
  );
  t.regex(answer, /^HTTP\/1\.1 413 /);
  t.true(answer.includes('{"error":"Track event is too large"}'));
  t.regex(answer, /connection: close/i);
});

test('a body shorter than its Content-Length, then a closed connection: nothing stored, the gateway goes on', async (t) => {
  const body = trackBody();
  await raw(`POST /api/track/${tenant.slug} HTTP/1.1\r\nHost: x\r\nX-Api-Key: ${tenant.key}\r\nContent-Length: 5000\r\n\r\n${JSON.stringify(body)}`, 300);
  const next = await track(JSON.stringify(trackBody()));
  t.is(next.status, 202);
});
