// A gateway of two processes (GATEWAY_PROCESSES=2, gateway/cluster/): `intake gateway` as a
// node:cluster primary whose processes share one port. Requests reach both processes and are
// stored; each process's old generation is capped for its share of the caches; GET /metrics on
// either one adds up both; SIGTERM drains both; a killed process is replaced while the other
// answers; processes whose primary is killed end with it.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import test from 'ava';
import { METRIC_NAMES } from '../../gateway/metrics/gateway-metrics.ts';
import { eventually } from '../helpers/eventually.ts';
import { halfSentTracks, request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { spawnIntake, workerInProcess, type Child } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

// Serial: each test starts three processes, and the machine is shared.
let h: Harness;
test.before(async () => {
  h = await openHarness();
});
test.after.always(() => closeEmptied(h));

async function startGateway(t: { teardown(fn: () => void): void }, env: Record<string, string> = {}): Promise<Child & { pids: number[] }> {
  const gateway = await spawnIntake('gateway', { ...h.env, GATEWAY_PROCESSES: '2', ...env }, 60_000);
  t.teardown(() => void gateway.kill('SIGKILL'));
  const announced = /"processPids":\[(\d+),(\d+)\][^\n]*"msg":"gateway listening"/.exec(gateway.output());
  return Object.assign(gateway, { pids: announced ? [Number(announced[1]), Number(announced[2])] : [] });
}

/** One request on a connection of its own (so the primary hands it to the next process in turn): status, body and request id. */
function once(url: string, path: string, options: { method?: string; headers?: Record<string, string>; body?: unknown } = {}) {
  const body = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
  return new Promise<{ status: number; text: string; requestId: string }>((resolve, reject) => {
    const req = http.request(url + path, {
      method: options.method ?? (body ? 'POST' : 'GET'),
      agent: false,
      headers: { ...options.headers, ...(body ? { 'content-type': 'application/json', 'content-length': body.length } : {}) },
      timeout: 10_000,
    });
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text, requestId: String(res.headers['x-request-id'] ?? '') }));
    });
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

/** The process that logged the request (each line carries its process's pid). */
function answeredBy(gateway: Child, requestId: string): number | undefined {
  const line = gateway
    .output()
    .split('\n')
    .find((l) => l.includes(`"requestId":"${requestId}"`));
  const pid = line && /"pid":(\d+)/.exec(line)?.[1];
  return pid ? Number(pid) : undefined;
}

/** The request log is written asynchronously: wait until every id has its line. */
async function answeringPids(gateway: Child, requestIds: string[]): Promise<number[]> {
  await eventually(async () => requestIds.every((id) => answeredBy(gateway, id) !== undefined), { timeoutMs: 5000, intervalMs: 50 });
  return distinct(requestIds.map((id) => answeredBy(gateway, id)!));
}

const distinct = (pids: number[]) => [...new Set(pids)].sort((a, b) => a - b);

const track = (gateway: Child, tenant: Tenant) => once(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body: trackBody() });
const trackCount = async (gateway: Child) => {
  const scrape = await once(gateway.url, '/metrics');
  return { scrape, value: samples(scrape.text).get(series(METRIC_NAMES.requests, { route: 'track', status: '202' })) ?? 0 };
};

test.serial('Track and Identify are answered by both processes and stored', async (t) => {
  const gateway = await startGateway(t);
  t.is(gateway.pids.length, 2, gateway.output());
  const tenant = await newTenant(h);
  const tracks = await Promise.all(Array.from({ length: 20 }, () => track(gateway, tenant)));
  t.deepEqual(
    tracks.map((r) => r.status),
    Array(20).fill(202),
  );
  const identifies = await Promise.all(
    Array.from({ length: 10 }, (_, i) =>
      once(gateway.url, `/api/identify/${tenant.slug}`, {
        headers: { 'x-api-key': tenant.key },
        body: { userId: `cluster-${i}`, traits: { plan: 'pro', n: i } },
      }),
    ),
  );
  t.deepEqual(
    identifies.map((r) => r.status),
    Array(10).fill(200),
  );
  t.deepEqual(
    await answeringPids(
      gateway,
      [...tracks, ...identifies].map((r) => r.requestId),
    ),
    distinct(gateway.pids),
    'both processes answered',
  );

  t.is(await h.db.profileUser.count({ where: { environmentId: tenant.environmentId } }), 10);
  const profile = await request(gateway.url, `/api/profiles/${tenant.slug}/cluster-7`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
  t.is(profile.status, 200);
  t.is(profile.json.fields.n, 7);
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 20), 'every accepted event stored');
});

test.serial("each process's heap is capped for its share of the caches, and the listening line says so", async (t) => {
  // Shares of 100 + 8 MB: 256 + 3 × 108 = 580 MB (the whole caches' would be 904).
  const gateway = await startGateway(t, { IDENTIFY_CACHE_MB: '200', KEY_CACHE_MB: '16' });
  t.is(gateway.pids.length, 2, gateway.output());
  const line = JSON.parse(
    gateway
      .output()
      .split('\n')
      .find((l) => l.includes('"msg":"gateway listening"'))!,
  );
  t.like(line, { youngGenerationMb: 96, oldGenerationMb: 580 });
  for (const pid of gateway.pids) {
    // What node was started with: its arguments as the kernel holds them (the last of a flag wins).
    const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    t.is(args.findLast((a) => a.startsWith('--max-old-space-size='))?.split('=')[1], '580', `process ${pid}: ${args.join(' ')}`);
    t.is(args.findLast((a) => a.startsWith('--max-semi-space-size='))?.split('=')[1], '32', `process ${pid}`);
  }
});

test.serial('GET /metrics on either process adds up both: N requests raise the counter by exactly N', async (t) => {
  const gateway = await startGateway(t);
  const tenant = await newTenant(h);
  const before = await trackCount(gateway);
  const N = 24;
  const sent = await Promise.all(Array.from({ length: N }, () => track(gateway, tenant)));
  t.deepEqual(
    sent.map((r) => r.status),
    Array(N).fill(202),
  );
  t.deepEqual(
    await answeringPids(
      gateway,
      sent.map((r) => r.requestId),
    ),
    distinct(gateway.pids),
    'both processes took Track requests',
  );
  // Scrapes on connections of their own alternate between the processes: each must see all N.
  const scrapes = [];
  for (let i = 0; i < 6; i++) scrapes.push(await trackCount(gateway));
  t.deepEqual(
    scrapes.map((s) => s.value - before.value),
    Array(6).fill(N),
  );
  t.deepEqual(
    await answeringPids(
      gateway,
      scrapes.map((s) => s.scrape.requestId),
    ),
    distinct(gateway.pids),
    'both processes answered scrapes',
  );
  const m = samples(scrapes.at(-1)!.scrape.text);
  // The histogram adds up as the counter does.
  t.is(m.get(series(`${METRIC_NAMES.duration}_count`, { route: 'track', status: '202' })), before.value + N);
  // The queue depth is read from Redis by each process: taken once, not summed over the processes.
  const waiting = (await h.operator.eventsQueue().getJobCounts('waiting')).waiting;
  t.true(waiting > 0);
  t.is(m.get(series(METRIC_NAMES.queueJobs, { queue: 'events', state: 'waiting' })), waiting);
});

test.serial('SIGTERM: requests in flight on both processes are answered, then every process stops and the command exits 0', async (t) => {
  // Neither the drain's bound nor the body's is under test here: a loaded machine must not reach them.
  const gateway = await startGateway(t, { SHUTDOWN_TIMEOUT_MS: '60000', BODY_TIMEOUT_MS: '60000' });
  const tenant = await newTenant(h);
  // Each request has its headers and part of its body on the wire when the signal arrives.
  const started = halfSentTracks(gateway.url, tenant.slug, tenant.key, 10);
  // The aggregate gauge of bodies being read is the sum over the processes.
  const uploads = async () => samples((await once(gateway.url, '/metrics')).text).get(METRIC_NAMES.uploads);
  t.is(await eventually(async () => (await uploads()) === 10, { timeoutMs: 10_000, intervalMs: 50 }), true, 'all ten requests reached the gateway');
  const signalledAt = Date.now();
  gateway.process.kill('SIGTERM');
  const refused = await eventually(
    () =>
      once(gateway.url, '/healthz').then(
        () => false,
        () => true,
      ),
    { timeoutMs: 10_000, intervalMs: 50 },
  );
  t.true(refused, 'no new connections once draining');
  const finishedAt = Date.now();
  for (const s of started) s.finish();
  const replies = await Promise.all(started.map((s) => s.reply));
  if (replies.some((r) => r.status !== 202)) {
    // What a dropped connection says, and each process's last words (a CI run once saw five of ten dropped).
    t.log({ signalledAt, finishedAt, errors: replies.map((r) => r.error) });
    t.log((await gateway.exited, gateway.output()));
  }
  t.deepEqual(
    replies.map((r) => r.status),
    Array(10).fill(202),
  );
  t.is(await gateway.exited, 0);
  t.deepEqual(
    await answeringPids(
      gateway,
      replies.map((r) => r.requestId),
    ),
    distinct(gateway.pids),
    'both processes had requests in flight',
  );
  const stopped = [...gateway.output().matchAll(/"pid":(\d+)[^\n]*"msg":"gateway stopped"/g)].map((m) => Number(m[1]));
  t.deepEqual(distinct(stopped), distinct(gateway.pids), 'each process drained and closed');
  t.regex(gateway.output(), /"msg":"all gateway processes stopped"/);
  // Their batches reached Redis before they stopped.
  const worker = await workerInProcess(h);
  t.teardown(() => worker.close());
  t.true(await eventually(async () => (await h.db.event.count({ where: { environmentId: tenant.environmentId } })) === 10));
});

test.serial('a killed process is replaced while the other answers; processes whose primary is killed end with it', async (t) => {
  const gateway = await startGateway(t);
  const tenant = await newTenant(h);
  const [victim, survivor] = gateway.pids;
  process.kill(victim, 'SIGKILL');
  // The primary learns of the death at once; until the replacement listens, the survivor answers alone.
  t.true(
    await eventually(async () => gateway.output().includes('"msg":"gateway process exited unexpectedly; starting another"'), {
      timeoutMs: 5000,
      intervalMs: 20,
    }),
  );
  t.regex(gateway.output(), new RegExp(`"processPid":${victim},"code":null,"signal":"SIGKILL"`));
  const meanwhile = await Promise.all(Array.from({ length: 6 }, () => track(gateway, tenant)));
  t.deepEqual(
    meanwhile.map((r) => r.status),
    Array(6).fill(202),
  );
  const replaced = await eventually(async () => /"processPid":(\d+),"msg":"gateway process replaced"/.exec(gateway.output()), { timeoutMs: 30_000 });
  t.truthy(replaced, gateway.output());
  const replacement = Number(replaced![1]);
  t.not(replacement, victim);
  const after = await Promise.all(Array.from({ length: 10 }, () => track(gateway, tenant)));
  t.deepEqual(
    after.map((r) => r.status),
    Array(10).fill(202),
  );
  t.deepEqual(
    await answeringPids(
      gateway,
      after.map((r) => r.requestId),
    ),
    distinct([survivor, replacement]),
  );
  // The two live processes' counts add up; the dead one's went with it.
  t.is((await trackCount(gateway)).value, 16 - meanwhile.filter((r) => answeredBy(gateway, r.requestId) === victim).length);

  // A primary killed outright leaves its processes nothing to serve: they end too (Node's cluster exits them when the channel closes).
  gateway.process.kill('SIGKILL');
  await gateway.exited;
  const alive = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  t.true(await eventually(async () => !alive(survivor) && !alive(replacement), { timeoutMs: 20_000 }), 'the processes exited');
});
