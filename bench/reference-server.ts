// The benchmark's yardstick, not part of the product: Koa + @koa/router + koa-bodyparser and
// one `await queue.add()` per request, the naive way to put an event in BullMQ. No auth, no
// validation, no size measure. Started by bench/run.mts as its own process.
import http from 'node:http';
import Router from '@koa/router';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import Koa from 'koa';
import bodyParser from 'koa-bodyparser';

const port = Number(process.env.PORT ?? 3100);
const connection = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
const queue = new Queue('events', { connection, prefix: process.env.QUEUE_PREFIX ?? 'bench-ref' });
await queue.waitUntilReady();

const router = new Router();
router.post('/api/track/:orgSlug', async (ctx) => {
  const body = ctx.request.body as { messageId: string };
  await queue.add('track', body, { jobId: String(body.messageId), removeOnComplete: true });
  ctx.status = 202;
  ctx.body = { message_id: body.messageId, status: 'accepted' };
});
const app = new Koa();
app.use(bodyParser());
app.use(router.routes());
http.createServer(app.callback()).listen(port, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'reference listening', port })));
process.on('SIGTERM', () => process.exit(0));
