// GatewayKoa (gateway/koa-app.ts) over real HTTP: an answer written straight to Node's response
// takes no on-finished listeners, and every other answer is still Koa's own, status, headers,
// HEAD and all. If a Koa release stops calling handleRequest, the first test fails.
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import Koa from 'koa';
import { GatewayKoa } from '../../gateway/koa-app.ts';

/** Each response the server wrote, with whether on-finished was attached to it (it marks the response). */
interface Seen {
  onFinished: boolean;
}

async function serve(t: { teardown(fn: () => void): void }, app: Koa): Promise<{ url: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  const handle = app.callback();
  const server = http.createServer((req: IncomingMessage, res: ServerResponse) => {
    res.once('finish', () => seen.push({ onFinished: '__onFinished' in res }));
    void handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

function gatewayApp(): Koa {
  const app = new GatewayKoa();
  app.silent = true;
  app.use(async (ctx, next) => {
    if (ctx.path === '/direct') {
      ctx.respond = false;
      ctx.res.writeHead(202, { 'Content-Type': 'application/json' });
      ctx.res.end('{"status":"accepted"}');
      return;
    }
    if (ctx.path === '/json') {
      ctx.status = 400;
      ctx.set('X-Request-Id', 'r-1');
      ctx.body = { error: 'bad' };
      return;
    }
    if (ctx.path === '/empty') {
      ctx.status = 204;
      return;
    }
    if (ctx.path === '/throws') throw new Error('boom');
    await next();
  });
  return app;
}

test('an answer written straight to the response has no on-finished listeners; Koa still attaches them to its own', async (t) => {
  const { url, seen } = await serve(t, gatewayApp());
  const direct = await fetch(`${url}/direct`, { method: 'POST', body: '{}' });
  t.is(direct.status, 202);
  t.is(await direct.text(), '{"status":"accepted"}');
  const viaKoa = await fetch(`${url}/json`);
  t.is(viaKoa.status, 400);
  await viaKoa.text();
  t.deepEqual(
    seen.map((s) => s.onFinished),
    [false, true],
  );
});

test('answers set on the context are written by Koa as before: status, body, headers, 204, HEAD, the default 404', async (t) => {
  const { url } = await serve(t, gatewayApp());
  const json = await fetch(`${url}/json`);
  t.is(json.status, 400);
  t.is(json.headers.get('x-request-id'), 'r-1');
  t.is(json.headers.get('content-type'), 'application/json; charset=utf-8');
  t.deepEqual(await json.json(), { error: 'bad' });

  const head = await fetch(`${url}/json`, { method: 'HEAD' });
  t.is(head.status, 400);
  t.is(head.headers.get('content-length'), String('{"error":"bad"}'.length));
  t.is(await head.text(), '');

  const empty = await fetch(`${url}/empty`);
  t.is(empty.status, 204);
  t.is(await empty.text(), '');

  const missing = await fetch(`${url}/nothing-here`);
  t.is(missing.status, 404);
  t.is(await missing.text(), 'Not Found');
});

test('an error no middleware caught is answered by Koa with its plain 500, as Koa does', async (t) => {
  const { url } = await serve(t, gatewayApp());
  const reply = await fetch(`${url}/throws`);
  t.is(reply.status, 500);
  t.is(await reply.text(), 'Internal Server Error');
});

test('the same app on plain Koa answers the same (the reference the override must match)', async (t) => {
  const plain = new Koa();
  plain.silent = true;
  plain.use(gatewayApp().middleware[0]);
  const { url, seen } = await serve(t, plain);
  const gateway = await serve(t, gatewayApp());
  for (const path of ['/json', '/empty', '/nothing-here', '/throws']) {
    const [ours, theirs] = await Promise.all([fetch(`${gateway.url}${path}`), fetch(`${url}${path}`)]);
    t.is(ours.status, theirs.status, path);
    t.is(await ours.text(), await theirs.text(), path);
    t.is(ours.headers.get('content-type'), theirs.headers.get('content-type'), path);
  }
  t.true(seen.every((s) => s.onFinished));
});
