// The one error answer (the outermost middleware's) over real HTTP: a body that cannot be serialized is the spec's JSON
// 500 (not Koa's plain text), and a deeply nested one is written whole.
import http from 'node:http';
import test from 'ava';
import Koa from 'koa';
import { createLogger } from '../../platform/logger.ts';
import { listen } from '../../platform/listen.ts';
import { requestLog } from '../../gateway/middleware/request-log.ts';
import { request } from '../helpers/http.ts';

async function serve(body: () => unknown): Promise<{ url: string; close(): void }> {
  const app = new Koa();
  app.silent = true;
  app.use(requestLog(createLogger('silent', 'test'), () => {}, Date.now));
  app.use((ctx) => {
    ctx.body = body();
  });
  const server = http.createServer(app.callback());
  const port = await listen(server, 0, '127.0.0.1');
  return { url: `http://127.0.0.1:${port}`, close: () => server.close() };
}

test('a body JSON cannot write is the JSON 500 Internal error', async (t) => {
  const s = await serve(() => ({ n: 1n }));
  t.teardown(() => s.close());
  const reply = await request(s.url, '/', { method: 'GET' });
  t.is(reply.status, 500);
  t.deepEqual(reply.json, { error: 'Internal error' });
  t.regex(reply.headers.get('content-type') ?? '', /^application\/json/);
});

test('a body nested deeper than JSON.stringify recurses is written whole, as JSON', async (t) => {
  let deep: unknown = 'core';
  for (let i = 0; i < 20_000; i++) deep = [deep];
  const s = await serve(() => ({ deep }));
  t.teardown(() => s.close());
  const reply = await request(s.url, '/', { method: 'GET' });
  t.is(reply.status, 200);
  t.regex(reply.headers.get('content-type') ?? '', /^application\/json/);
  t.is(reply.text, `{"deep":${'['.repeat(20_000)}"core"${']'.repeat(20_000)}}`);
});
