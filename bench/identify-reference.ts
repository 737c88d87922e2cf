// The benchmark's yardstick for Identify and Profiles, not part of the product: Koa +
// @koa/router + koa-bodyparser and one pg statement per request, the naive way to keep
// profiles in PostgreSQL. Identify is one `INSERT … ON CONFLICT DO UPDATE SET fields = fields
// || $traits` (no per-trait times, no idempotency, no consent, no outbox, no auth, no
// validation); Profiles one SELECT. Started by bench/run.mts as its own process.
import http from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import bodyParser from 'koa-bodyparser';
import pg from 'pg';

const port = Number(process.env.PORT ?? 3101);
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
await pool.query(
  `CREATE TABLE IF NOT EXISTS bench_reference_profiles (user_id text PRIMARY KEY, fields jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`,
);

const router = new Router();
router.post('/api/identify/:orgSlug', async (ctx) => {
  const body = ctx.request.body as { userId: string; traits: Record<string, unknown>; messageId?: string };
  await pool.query(
    `INSERT INTO bench_reference_profiles (user_id, fields) VALUES ($1, $2::jsonb)
     ON CONFLICT (user_id) DO UPDATE SET fields = bench_reference_profiles.fields || EXCLUDED.fields, updated_at = now()`,
    [body.userId, JSON.stringify(body.traits)],
  );
  ctx.body = { success: true, messageId: body.messageId, duplicate: false };
});
router.get('/api/profiles/:orgSlug/:userId', async (ctx) => {
  const { rows } = await pool.query('SELECT user_id, fields, updated_at FROM bench_reference_profiles WHERE user_id = $1', [ctx.params.userId]);
  if (!rows[0]) {
    ctx.status = 404;
    ctx.body = { error: 'Profile not found' };
    return;
  }
  ctx.body = { user_id: rows[0].user_id, updated_at: rows[0].updated_at.getTime(), fields: rows[0].fields };
});
const app = new Koa();
app.use(bodyParser());
app.use(router.routes());
http.createServer(app.callback()).listen(port, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'reference listening', port })));
process.on('SIGTERM', () => void pool.end().finally(() => process.exit(0)));
