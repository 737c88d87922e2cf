// `node --import tsx bench/client-cost.mts`: what one statement costs this process through
// Prisma ($queryRaw on the PrismaPg adapter) and through the node-postgres pool that adapter
// holds, for the two hot paths' statements (a Profiles read; a small Identify-shaped write in
// its own transaction). Sequential and concurrent (16 at a time) runs; wall time and this
// process's CPU time per statement. The figures behind platform/db.ts poolOf().
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../platform/config.ts';
import { createDb, poolOf } from '../platform/db.ts';
import { migrate } from '../cli/migrate.ts';
import { hashStored } from '../platform/identity-hash.ts';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
const N = Number(process.env.BENCH_STATEMENTS ?? 4000);

await migrate(DATABASE_URL);
const db = createDb(loadConfig({ ...process.env, DATABASE_URL }));
const pool = poolOf(db);
const envId = (await db.$queryRaw<{ id: string }[]>`SELECT id FROM environments LIMIT 1`)[0]?.id;
if (!envId) throw new Error('run npm run bench once first (it creates an environment)');
const userKey = 'user-1';
const hash = hashStored(userKey);
const SQL = `SELECT p.id, p.fields, p.updated_at FROM profile_users u JOIN profiles p ON p.id = u.profile_id WHERE u.environment_id = $1::uuid AND u.user_hash = $2 AND u.user_id = $3`;
const table = `bench_client_cost_${randomBytes(3).toString('hex')}`;
await pool.query(`CREATE TABLE ${table} (k text PRIMARY KEY, v text)`);

const cases: Record<string, (i: number) => Promise<unknown>> = {
  'read, Prisma $queryRaw': () =>
    db.$queryRaw`SELECT p.id, p.fields, p.updated_at FROM profile_users u JOIN profiles p ON p.id = u.profile_id WHERE u.environment_id = ${envId}::uuid AND u.user_hash = ${hash} AND u.user_id = ${userKey}`,
  'read, pg pool.query': () => pool.query(SQL, [envId, hash, userKey]),
  'write txn, Prisma $transaction': (i) =>
    db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe(`INSERT INTO ${table} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, `k${i % 1000}`, 'x');
    }),
  'write txn, pg client': async (i) => {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      await c.query(`INSERT INTO ${table} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, [`k${i % 1000}`, 'x']);
      await c.query('COMMIT');
    } finally {
      c.release();
    }
  },
};

async function measure(name: string, work: (i: number) => Promise<unknown>, concurrency: number) {
  for (let i = 0; i < 300; i++) await work(i);
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < N) await work(next++);
    }),
  );
  const wall = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  console.log(
    JSON.stringify({ case: name, concurrency, 'wall µs/op': Math.round((wall * 1000) / N), 'client CPU µs/op': Math.round((used.user + used.system) / N) }),
  );
}

for (const concurrency of [1, 16]) for (const [name, work] of Object.entries(cases)) await measure(name, work, concurrency);
await pool.query(`DROP TABLE ${table}`);
await db.$disconnect();
