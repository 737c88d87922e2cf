// Redis full (maxmemory with noeviction, on a redis-server of the test's own): Track answers 503
// and /readyz says why while the OOM metric is 1, the worker neither spins nor floods its log,
// and once memory frees (the worker drains it, or an operator raises maxmemory) everything
// resumes without a restart, with every event ever answered 202 stored exactly once.
import { readFileSync } from 'node:fs';
import test, { type ExecutionContext } from 'ava';
import { Redis } from 'ioredis';
import { watchRedisMemory } from '../../platform/redis-memory.ts';
import { eventually, sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples } from '../helpers/metrics.ts';
import { capturedLogger, gatewayInProcess, spawnIntake, workerInProcess, type Child } from '../helpers/processes.ts';
import { startOwnRedis, type OwnRedis } from '../helpers/redis-server.ts';
import { newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const UNAVAILABLE = { error: 'Event storage is unavailable' };
/** The window the issue used: maxmemory set to what Redis uses plus about 2 MB. */
const WINDOW_BYTES = 2_000_000;
const CHECK_MS = 250;

interface Setup {
  redis: OwnRedis;
  h: Harness;
  tenant: Tenant;
  gateway: { url: string; close(): Promise<void> };
}

async function setUp(t: ExecutionContext, env: Record<string, string>): Promise<Setup> {
  const redis = await startOwnRedis();
  t.teardown(() => redis.close());
  const h = await openHarness({ REDIS_URL: redis.url, REDIS_MEMORY_CHECK_MS: String(CHECK_MS), ...env });
  t.teardown(() => h.close());
  const tenant = await newTenant(h);
  const gateway = await gatewayInProcess(h);
  t.teardown(() => gateway.close());
  // Ready once its first reading of Redis's memory is in (and before any maxmemory).
  t.truthy(await eventually(async () => (await request(gateway.url, '/readyz', { method: 'GET' })).status === 200));
  const { used } = await redis.memory();
  await redis.setMaxmemory(used + WINDOW_BYTES);
  return { redis, h, tenant, gateway };
}

const track = (s: Setup, body: Record<string, unknown>) =>
  request(s.gateway.url, `/api/track/${s.tenant.slug}`, { headers: { 'x-api-key': s.tenant.key }, body, timeoutMs: 10_000 });

/** About 2 KB each, so the window holds hundreds. */
const padded = () => trackBody({ event: 'Fill', properties: { pad: 'x'.repeat(2000) } });

/** Track from four clients at once until the first 503; returns every messageId answered 202. */
async function fillUntilRefused(t: ExecutionContext, s: Setup): Promise<string[]> {
  const accepted: string[] = [];
  let refused = false;
  let sent = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (!refused && sent < 20_000) {
        sent++;
        const body = padded();
        const reply = await track(s, body);
        if (reply.status === 202) accepted.push(body.messageId as string);
        else {
          t.is(reply.status, 503, reply.text);
          t.deepEqual(reply.json, UNAVAILABLE);
          refused = true;
        }
      }
    }),
  );
  t.true(refused, `Track answered 503 within ${sent} events`);
  t.log(`${accepted.length} events answered 202 before the first 503`);
  return accepted;
}

/**
 * /readyz read while the gateway holds Redis full. The gateway stops at the mark by counting
 * what it sent since its last reading of Redis; Redis stores a little less, so the next reading
 * (every CHECK_MS) may find room again and Track goes on until the mark. So the state is read
 * right after a refusal (and the oom gauge with it), sending more until one is read in time.
 */
async function readyzWhileFull(s: Setup, accepted: string[]) {
  for (let attempt = 0; ; attempt++) {
    const body = padded();
    const reply = await track(s, body);
    if (reply.status === 202) accepted.push(body.messageId as string);
    const [ready, gauge] = await Promise.all([readyz(s.gateway.url), oomGauge(s.gateway.url)]);
    if ((reply.status === 503 && ready.status === 503 && gauge === 1) || attempt === 200) return ready;
  }
}

async function readyz(url: string) {
  return request(url, '/readyz', { method: 'GET' });
}

async function oomGauge(url: string): Promise<number | undefined> {
  return samples((await request(url, '/metrics', { method: 'GET' })).text).get('intake_redis_oom');
}

/** Polls Track with fresh events until one is answered 202; every one answered 202 is added to `accepted`. */
async function acceptsAgain(t: ExecutionContext, s: Setup, accepted: string[], withinMs: number): Promise<void> {
  const started = Date.now();
  const ok = await eventually(
    async () => {
      const body = padded();
      const reply = await track(s, body);
      t.true(reply.status === 202 || reply.status === 503, reply.text);
      if (reply.status === 202) accepted.push(body.messageId as string);
      return reply.status === 202;
    },
    { timeoutMs: withinMs, intervalMs: 200 },
  );
  t.true(ok, `Track answered 202 again within ${withinMs} ms`);
  t.log(`Track answered 202 again ${Date.now() - started} ms after memory was freed`);
}

/** Every accepted messageId has exactly one row, and the tenant has no other. */
async function storedOnce(t: ExecutionContext, s: Setup, accepted: string[]) {
  const where = { environmentId: s.tenant.environmentId };
  t.true(await eventually(async () => (await s.h.db.event.count({ where })) >= accepted.length, { timeoutMs: 60_000 }), 'every accepted event stored');
  const perId = await s.h.db.event.groupBy({ by: ['messageId'], where, _count: { _all: true } });
  t.is(perId.length, accepted.length);
  t.true(
    perId.every((r) => r._count._all === 1),
    'none stored twice',
  );
  t.deepEqual(perId.map((r) => r.messageId).sort(), [...accepted].sort());
}

/** CPU seconds (user + system) a process has used, from /proc. */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

test('at the high-water mark Track answers 503 before Redis refuses anything, and the worker drains it back by itself', async (t) => {
  const s = await setUp(t, {});
  const accepted = await fillUntilRefused(t, s);
  t.true(accepted.length > 50, 'the window took events first');
  t.is(await s.redis.oomRefusals(), 0, 'Redis itself never refused a write');

  const ready = await readyzWhileFull(s, accepted);
  t.is(ready.status, 503);
  t.like(ready.json, { status: 'unavailable', postgres: true, redis: true });
  t.regex(ready.json.reason, /^Redis memory is full: .*high-water mark/);

  const worker = await workerInProcess(s.h);
  t.teardown(() => worker.close());
  await acceptsAgain(t, s, accepted, 30_000);
  t.truthy(await eventually(async () => (await readyz(s.gateway.url)).status === 200, { timeoutMs: 10_000 }), '/readyz ready again');
  t.is(await oomGauge(s.gateway.url), 0);
  await storedOnce(t, s, accepted);
  t.is(await s.redis.oomRefusals(), 0);
});

test('Redis refusing writes (OOM): the worker backs off with a bounded log, /readyz and the metric say so, and raising maxmemory resumes everything', async (t) => {
  const s = await setUp(t, {});
  const accepted = await fillUntilRefused(t, s);
  // Past the mark's protection, the state the issue reproduced: an operator lowers maxmemory
  // below what Redis holds (or another writer fills it), and Redis refuses every write, the
  // worker's scripts included.
  const { used: full } = await s.redis.memory();
  await s.redis.setMaxmemory(full - 256 * 1024);

  const refusalsBefore = await s.redis.oomRefusals();
  const worker: Child = await spawnIntake('worker', s.h.env);
  t.teardown(() => worker.kill('SIGKILL'));
  const metricsUrl = `http://127.0.0.1:${/"metricsPort":(\d+)/.exec(worker.output())![1]}`;
  // CPU from here (loading the modules before `worker started` costs a second or two); lines and refusals from its start.
  const cpuAtStart = cpuSeconds(worker.process.pid!);
  const WATCH_S = 12;
  await sleep(WATCH_S * 1000);
  const lines = worker.output().trimEnd().split('\n').length;
  const refusals = (await s.redis.oomRefusals()) - refusalsBefore;
  const cpu = (cpuSeconds(worker.process.pid!) - cpuAtStart) / WATCH_S;
  t.log(
    `worker while Redis refused writes, its first ${WATCH_S} s and more: ${lines} log lines, ${refusals} commands refused for memory, ${(cpu * 100).toFixed(1)} % of a core`,
  );
  t.true(refusals > 0, 'Redis refused the worker for memory');
  // Without the backoff: thousands of refusals and warning lines a second, most of a core.
  t.true(lines <= 40, `${lines} log lines`);
  t.true(refusals <= 150, `${refusals} refusals`);
  t.true(cpu < 0.25, `${(cpu * 100).toFixed(1)} % of a core`);
  t.regex(worker.output(), /"msg":"events worker: the same error \d+ more times"/, 'repeats are counted, not logged one by one');
  t.is(await s.h.db.event.count({ where: { environmentId: s.tenant.environmentId } }), 0, 'nothing could be moved while Redis refused');

  for (const url of [s.gateway.url, metricsUrl]) {
    const ready = await readyz(url);
    t.is(ready.status, 503, url);
    t.regex(ready.json.reason, /^Redis memory is full: .*refusing writes \(OOM\)/, url);
    t.is(await oomGauge(url), 1, url);
  }
  const refused = await track(s, padded());
  t.is(refused.status, 503);
  t.deepEqual(refused.json, UNAVAILABLE);

  // The operator's fix: more memory. Nothing is restarted.
  const { used } = await s.redis.memory();
  await s.redis.setMaxmemory(used + 64 * 1_048_576);
  await acceptsAgain(t, s, accepted, 30_000);
  await storedOnce(t, s, accepted);
  for (const url of [s.gateway.url, metricsUrl]) {
    t.truthy(await eventually(async () => (await readyz(url)).status === 200, { timeoutMs: 10_000 }), `${url} ready again`);
    t.is(await oomGauge(url), 0, url);
  }
  // Logged at once, or (its state changing often) within ten seconds.
  t.true(await eventually(async () => worker.output().includes('"msg":"Redis memory has room again: Track accepts events"'), { timeoutMs: 15_000 }));
});

test('with the mark at maxmemory (REDIS_HIGH_WATER_PERCENT=100) a refusal holds Redis full until the workers’ headroom is free, not merely until it reads under maxmemory', async (t) => {
  const redis = await startOwnRedis();
  t.teardown(() => redis.close());
  const client = new Redis(redis.url);
  t.teardown(() => client.disconnect());
  const memory = watchRedisMemory(client, { intervalMs: 100, highWaterPercent: 100, log: capturedLogger().log });
  t.teardown(() => memory.close());
  t.truthy(await eventually(async () => memory.reading()));
  const { used } = await redis.memory();
  await redis.setMaxmemory(used + 200_000);
  t.truthy(await eventually(async () => memory.reading()?.maxBytes === used + 200_000));
  t.false(memory.full(), 'under maxmemory and nothing refused: room');

  memory.refused();
  t.true(memory.full());
  await sleep(600);
  t.true(memory.full(), 'readings since show it under maxmemory, but within the headroom');
  t.regex(memory.reason()!, /refusing writes \(OOM\)/);

  await redis.setMaxmemory(used + 4 * 1_048_576);
  t.true(await eventually(async () => !memory.full()), 'room again once maxmemory is raised');
  t.is(memory.reason(), null);
});
