// `node --import tsx bench/identify-batch-cost.mts`: applyIdentifyBatch alone (no HTTP): wall
// time, this process's CPU and PostgreSQL's per batch and per call, for batches of 1, 8, 24 and
// 64 calls of the bench's shape, one batch at a time. Where a batch's time goes, without the
// gateway around it; the sizes give each side's cost per batch and per call.
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../platform/config.ts';
import { createDb, poolOf } from '../platform/db.ts';
import { callDigest } from '../identify/call-digest.ts';
import { stringifyJson } from '../platform/json-text.ts';
import { migrate } from '../cli/migrate.ts';
import { addressTraitsOf } from '../identify/validation.ts';
import { applyIdentifyBatch } from '../identify/identify-batch.ts';
import { toIdentifyCall } from '../identify/identify-plan.ts';
import { withCpu } from './cpu-usage.mts';

const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/intake_bench';
await migrate(DATABASE_URL);
const db = createDb(loadConfig({ ...process.env, DATABASE_URL }));
const pool = poolOf(db);
const envId = (await db.$queryRaw<{ id: string }[]>`SELECT id FROM environments LIMIT 1`)[0]?.id;
if (!envId) throw new Error('run npm run bench once first (it creates an environment)');
const run = randomBytes(3).toString('hex');
let n = 0;
const nextCall = () => {
  n++;
  const user = n % 10000;
  const traits = { name: `User ${user}`, plan: `p${n % 7}`, visits: n, email: `user${user}@shop.io` };
  const userId = `user-${user}`;
  const timestampMs = Date.now();
  const input = {
    userId,
    traitsText: stringifyJson(traits),
    addressTraits: addressTraitsOf(traits),
    messageId: `${run}-${n}`,
    timestamp: null,
    timestampMs,
    consent: [],
    callDigest: callDigest(userId, timestampMs, traits),
  };
  return toIdentifyCall({ id: envId, features: [] }, input, Date.now());
};
for (const size of [1, 8, 24, 64]) {
  const batches = Math.max(20, Math.round(1200 / size));
  for (let i = 0; i < 5; i++) await applyIdentifyBatch(pool, Array.from({ length: size }, nextCall));
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const { cpu: spent } = await withCpu(process.pid, async () => {
    for (let i = 0; i < batches; i++) await applyIdentifyBatch(pool, Array.from({ length: size }, nextCall));
    return {};
  });
  const wall = performance.now() - t0;
  const used = process.cpuUsage(cpu);
  console.log(
    JSON.stringify({
      size,
      'wall ms/batch': +(wall / batches).toFixed(2),
      'wall µs/call': Math.round((wall * 1000) / batches / size),
      'client CPU µs/call': Math.round((used.user + used.system) / batches / size),
      'PostgreSQL CPU ms/batch': +(spent.postgres / batches).toFixed(3),
      'PostgreSQL CPU µs/call': Math.round((spent.postgres * 1000) / batches / size),
    }),
  );
}
await db.$disconnect();
