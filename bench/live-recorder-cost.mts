// `node --import tsx bench/live-recorder-cost.mts`: the live view's recorder alone
// (gateway/live/recorder.ts) against a real Redis: what handing it one second of 5,000
// Identify calls/s (batches of 64) costs, and the CPU of the one write that follows (the newest
// LIVE_IDENTIFY_CALLS of the environment in one pipeline). Five rounds; the first warms up.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { identifyCallsKey } from '../platform/live-keys.ts';
import { createLogger } from '../platform/logger.ts';
import type { IdentifyCall, Plan } from '../identify/identify-plan.ts';
import { createLiveRecorder } from '../gateway/live/recorder.ts';

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
const prefix = `bench-recorder-${randomBytes(3).toString('hex')}`;
const KEEP = 200;
const BATCH = 64;
const batches = Math.ceil(5000 / BATCH);
const calls = Array.from({ length: BATCH }, (_, i) => ({ envId: 'env', messageId: `m-${i}`, input: { userId: `user-${i}` } })) as unknown as IdentifyCall[];
const plan = { verdicts: Array(BATCH).fill('applied'), changed: Array(BATCH).fill(['name', 'plan']) } as unknown as Plan;

for (let round = 1; round <= 5; round++) {
  // Timers far off: the write happens on close(), measured.
  const recorder = createLiveRecorder({
    config: { queuePrefix: prefix, liveIdentifyCalls: KEEP },
    redis,
    requestTotals: () => [],
    log: createLogger('silent', 'bench'),
    identifyEveryMs: 3_600_000,
    ratesEveryMs: 3_600_000,
  });
  const pushed = performance.now();
  for (let i = 0; i < batches; i++) recorder.identifyCommitted(calls, plan);
  const pushMs = performance.now() - pushed;
  const cpu = process.cpuUsage();
  const wall = performance.now();
  await recorder.close();
  const used = process.cpuUsage(cpu);
  console.log(
    JSON.stringify({
      round,
      [`hand over ${batches} batches (ms)`]: +pushMs.toFixed(3),
      'one write, CPU ms': +((used.user + used.system) / 1000).toFixed(2),
      'one write, wall ms': +(performance.now() - wall).toFixed(1),
    }),
  );
}
await redis.del(identifyCallsKey(prefix, 'env'));
redis.disconnect();
