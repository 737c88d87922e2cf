// The benchmark's yardsticks, not part of the product, started by bench/run.mts as their own
// process. Koa + @koa/router + koa-bodyparser, answering Track's 202, either:
// - REFERENCE=naive (default): with one `await queue.add()` per request, the naive way to put an
//   event in BullMQ. No auth, no validation, no size measure.
// - REFERENCE=plain: with no queue at all: it parses the body and answers. This is the stack's
//   own cost per request, the ceiling intake's Track is measured against.
import http from 'node:http';
import Router from '@koa/router';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import Koa from 'koa';
import bodyParser from 'koa-bodyparser';

const port = Number(process.env.PORT ?? 3100);
const plain = process.env.REFERENCE === 'plain';

async function naiveEnqueue(): Promise<(body: { messageId: string }) => Promise<unknown>> {
  const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
  const queue = new Queue('events', { connection, prefix: process.env.QUEUE_PREFIX ?? 'bench-ref' });
  await queue.waitUntilReady();
  return (body) => queue.add('track', body, { jobId: String(body.messageId), removeOnComplete: true });
}

const enqueue = plain ? null : await naiveEnqueue();
const router = new Router();
router.post('/api/track/:orgSlug', async (ctx) => {
  const body = ctx.request.body as { messageId: string };
  if (enqueue) await enqueue(body);
  ctx.status = 202;
  ctx.body = { message_id: body.messageId, status: 'accepted' };
});
const app = new Koa();
app.use(bodyParser());
app.use(router.routes());
http.createServer(app.callback()).listen(port, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'reference listening', port })));
process.on('SIGTERM', () => process.exit(0));
