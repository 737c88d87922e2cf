// Tenants cannot lock out another (docs/reliability.md, "Fairness between tenants"), at the
// deployed defaults, while environment A calls Track and Profiles 200 times a second:
// - 1,000 connections of environment B each send their headers, with a valid key, and the first
//   byte of a 200-byte body, then nothing. B may read 100 bodies at once
//   (MAX_UPLOADS_PER_ENVIRONMENT): the rest get 429 with Retry-After at once, and the 100 are cut
//   with 408 at BODY_TIMEOUT_MS (5 s).
// - 1,000 such connections spread over ten environments, 100 each, and held for 20 s: each
//   upload answered opens again (at once after a cut, after its Retry-After after a refusal).
//   Together they could fill MAX_UPLOADS (500); their fair shares leave room for A.
// A meanwhile gets no 429 and a p99 under 100 ms, and every Track call of A answered 202 is
// queued. It runs alone (ava.alone.config.mjs): it measures latency, which other test files on
// two cores would swamp.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import test, { type ExecutionContext } from 'ava';
import { loadConfig } from '../../platform/config.ts';
import { METRIC_NAMES } from '../../gateway/metrics/gateway-metrics.ts';
import { queuedMessageIds } from '../helpers/batches.ts';
import { sleep } from '../helpers/eventually.ts';
import { request, trackBody } from '../helpers/http.ts';
import { samples, series } from '../helpers/metrics.ts';
import { spawnIntake, type Child } from '../helpers/processes.ts';
import { closeEmptied, newTenant, openHarness, type Harness, type Tenant } from '../helpers/services.ts';

const defaults = loadConfig({});
const STALLED = 1000;
const BODY_BYTES = 200;
/** The stalling environments of the second scenario, and how long they keep their uploads stalled. */
const STALLING_TENANTS = 10;
const HOLD_MS = 20_000;
/** Checks of the uploads run every 250 ms, and a body is cut within two of them after its allowance (gateway/upload-watch.ts). */
const CHECKS_MS = 2 * 250;
/** Room for a loaded 2-core machine on top of the stated bound (timers and answers run late). */
const LOAD_SLACK_MS = 2000;
/** Each of A's lanes calls Track and Profiles once per this many ms: 200 calls/s over two lanes. */
const PACE_MS = 20;

let h: Harness;

test.before(async () => {
  h = await openHarness();
});

test.after.always(async () => {
  await closeEmptied(h);
});

/** A gateway of the test's own at the deployed defaults (the harness sets only connections, ports and the queue prefix): its metrics count from zero. */
async function gatewayFor(t: ExecutionContext): Promise<Child> {
  const gateway = await spawnIntake('gateway', h.env);
  t.teardown(() => gateway.kill('SIGKILL'));
  return gateway;
}

/** The soft limit on open files of this process (the gateway, its child, has the same). */
function openFilesLimit(): number {
  const line = /^Max open files\s+(\S+)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
  return line?.[1] === 'unlimited' ? Infinity : Number(line?.[1]);
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];

interface Call {
  what: 'track' | 'profiles';
  status: number;
  ms: number;
  messageId?: string;
}

/**
 * A's steady traffic until stop(): `lanes` loops, each a Track call then a Profiles read every
 * PACE_MS. Paced rather than as fast as possible: a caller's ordinary load, which leaves the
 * gateway room, so what is measured is the others' effect on A and not A queueing behind itself.
 */
function runA(gateway: Child, tenant: Tenant, lanes: number) {
  const calls: Call[] = [];
  let stopped = false;
  const lane = async () => {
    while (!stopped) {
      const next = performance.now() + PACE_MS;
      const body = trackBody();
      let started = performance.now();
      const tracked = await request(gateway.url, `/api/track/${tenant.slug}`, { headers: { 'x-api-key': tenant.key }, body });
      calls.push({ what: 'track', status: tracked.status, ms: performance.now() - started, messageId: body.messageId as string });
      started = performance.now();
      const read = await request(gateway.url, `/api/profiles/${tenant.slug}/a-user`, { method: 'GET', headers: { 'x-api-key': tenant.key } });
      calls.push({ what: 'profiles', status: read.status, ms: performance.now() - started });
      await sleep(Math.max(0, next - performance.now()));
    }
  };
  const running = Promise.all(Array.from({ length: lanes }, lane));
  return {
    calls,
    stop: async () => {
      stopped = true;
      await running;
      return calls;
    },
  };
}

interface Summary {
  calls: number;
  p50: number;
  p99: number;
  max: number;
}

function summarize(calls: Call[]): Summary {
  const sorted = calls.map((c) => c.ms).sort((x, y) => x - y);
  return { calls: calls.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1)! };
}
const show = (s: Summary) => `${s.calls} calls, p50 ${s.p50.toFixed(1)} ms, p99 ${s.p99.toFixed(1)} ms, max ${s.max.toFixed(1)} ms`;

const stallScript = fileURLToPath(new URL('../helpers/stalled-uploads.ts', import.meta.url));

interface StallAnswer {
  /** Which of the stalling tenants. */
  tenant: number;
  status: number;
  ms: number;
  retryAfter?: string;
  connection?: string;
  body: string;
}

interface StallResult {
  openMs: number;
  answers: (StallAnswer | null)[];
  closed: number[];
}

/**
 * `count` stalled uploads of `tenants` (in turn) from a process of their own
 * (test/helpers/stalled-uploads.ts), held `holdMs` when given, and the most the gateway read at once meanwhile.
 */
async function stall(gateway: Child, tenants: Tenant[], count: number, holdMs = 0): Promise<StallResult & { peakUploads: number }> {
  const child = spawn(process.execPath, [...process.execArgv, stallScript], {
    env: {
      ...process.env,
      STALL_URL: gateway.url,
      STALL_TENANTS: JSON.stringify(tenants.map((x) => ({ path: `/api/track/${x.slug}`, key: x.key }))),
      STALL_COUNT: String(count),
      STALL_BYTES: String(BODY_BYTES),
      STALL_HOLD_MS: String(holdMs),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  let peakUploads = 0;
  const sampleUploads = async () => {
    const value = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text).get(METRIC_NAMES.uploads) ?? 0;
    peakUploads = Math.max(peakUploads, value);
  };
  const sampler = setInterval(() => void sampleUploads().catch(() => {}), 200);
  try {
    const code = await exited;
    if (code !== 0) throw new Error(`the stalling process exited ${code}`);
    return { ...(JSON.parse(out) as StallResult), peakUploads };
  } finally {
    clearInterval(sampler);
  }
}

/** How long the gateway took to answer each Track request with `status` (its request log), in what it printed after `from`. */
function answerTimesLogged(gateway: Child, from: number, status: number): number[] {
  const line = new RegExp(`"route":"track","status":${status},"ms":([\\d.]+)`, 'g');
  return [...gateway.output().slice(from).matchAll(line)].map((m) => Number(m[1])).sort((x, y) => x - y);
}

/**
 * The p99 bound is an absolute figure on a shared 2-core machine, where other processes' load
 * can make every latency several times longer for minutes. So each round first measures A
 * alone: while that is not calm (p99 under CALM_P99_MS) the machine cannot show the flood's
 * effect, and the round waits and measures again (up to ATTEMPTS times; the last attempt floods
 * anyway). A flooded round that misses the bound is run again, up to ROUNDS; every other
 * assertion (no 429 for A, the flood's refusals and cuts, nothing lost) holds in every flooded round.
 */
const ROUNDS = 3;
const ATTEMPTS = 8;
const CALM_P99_MS = 50;

/**
 * Rounds of `flood` (it resolves once the flood is over) while A's traffic runs, as above, each
 * followed by `check` of what it did (`logFrom`: where the gateway's output of the round
 * begins); `minCalls`: how many of each of A's calls a round must have measured. Resolves with
 * A's Track calls answered 202.
 */
async function floodRounds<Flooded>(
  t: ExecutionContext,
  gateway: Child,
  a: Tenant,
  minCalls: number,
  flood: () => Promise<Flooded>,
  check: (flooded: Flooded, attempt: number, logFrom: number) => void,
): Promise<Call[]> {
  const accepted: Call[] = [];
  let floods = 0;
  let met = false;
  const missed: string[] = [];
  for (let attempt = 1; attempt <= ATTEMPTS && floods < ROUNDS && !met; attempt++) {
    // A alone, for 3 s: what this machine gives now.
    const calm = runA(gateway, a, 2);
    await sleep(3000);
    const baseline = summarize(await calm.stop());
    if (baseline.p99 >= CALM_P99_MS && !(attempt === ATTEMPTS && floods === 0)) {
      t.log(`attempt ${attempt}: A alone ${show(baseline)}: the machine is too busy to measure against, waiting`);
      await sleep(5000);
      continue;
    }
    floods++;
    const logFrom = gateway.output().length;
    const aTraffic = runA(gateway, a, 2);
    await sleep(500);
    const flooded = await flood();
    await sleep(300);
    const calls = await aTraffic.stop();
    accepted.push(...calls.filter((c) => c.what === 'track' && c.status === 202));

    // A: served throughout, none refused.
    const statuses = new Map<string, number>();
    for (const call of calls) statuses.set(`${call.what} ${call.status}`, (statuses.get(`${call.what} ${call.status}`) ?? 0) + 1);
    const measured = summarize(calls);
    t.log(`attempt ${attempt}: A alone ${show(baseline)}; A during the flood ${show(measured)} ${JSON.stringify(Object.fromEntries(statuses))}`);
    for (const what of ['track', 'profiles'])
      t.true(calls.filter((c) => c.what === what).length >= minCalls, `${calls.filter((c) => c.what === what).length} ${what} calls of A measured`);
    t.deepEqual([...statuses.keys()].sort(), ['profiles 200', 'track 202'], 'every call of A answered 202 (Track) or 200 (Profiles): no 429');
    check(flooded, attempt, logFrom);
    if (measured.p99 < 100) met = true;
    else missed.push(`attempt ${attempt}: ${measured.p99.toFixed(1)} ms (A alone ${baseline.p99.toFixed(1)} ms)`);
  }
  t.true(floods > 0, 'at least one flooded round');
  t.true(met, `A's p99 during the flood under 100 ms in one of ${floods} rounds: ${missed.join('; ')}`);
  return accepted;
}

/** A and the stalling tenants, their keys looked up once (the stalled uploads then wait on nothing but their bodies), A's profile made. */
async function tenantsFor(t: ExecutionContext, gateway: Child, stalling: number): Promise<{ a: Tenant; others: Tenant[] }> {
  const a = await newTenant(h);
  const others: Tenant[] = [];
  for (let i = 0; i < stalling; i++) others.push(await newTenant(h));
  const identified = await request(gateway.url, `/api/identify/${a.slug}`, {
    headers: { 'x-api-key': a.key },
    body: { userId: 'a-user', traits: { plan: 'pro' } },
  });
  t.is(identified.status, 200);
  for (const other of others)
    t.is((await request(gateway.url, `/api/track/${other.slug}`, { headers: { 'x-api-key': other.key }, body: trackBody() })).status, 202);
  // Warm-up: A's calls before any measurement (code loaded, connections to Redis and PostgreSQL made).
  const warmUp = runA(gateway, a, 2);
  await sleep(1000);
  await warmUp.stop();
  return { a, others };
}

/** Each stalled upload is a socket in the stalling process and one in the gateway, plus what each already holds. */
function enoughOpenFiles(t: ExecutionContext): boolean {
  const limit = openFilesLimit();
  t.true(limit >= STALLED + 500, `ulimit -n is ${limit}: this test needs at least ${STALLED + 500} open files per process`);
  return limit >= STALLED + 500;
}

const refusedAsSpecified = (answers: (StallAnswer | null)[]) =>
  answers.every((x) => x!.status !== 429 || (x!.body === '{"error":"Too many requests"}' && x!.retryAfter === '1' && x!.connection === 'close'));
const cutAsSpecified = (answers: (StallAnswer | null)[]) =>
  answers.every((x) => x!.status !== 408 || (x!.body === '{"error":"Request timeout"}' && x!.connection === 'close'));

test.serial(
  '1,000 stalled uploads of B: B gets 429 beyond its part and its uploads are cut at the body bound; A meanwhile has no 429 and p99 < 100 ms',
  async (t) => {
    if (!enoughOpenFiles(t)) return;
    const gateway = await gatewayFor(t);
    const {
      a,
      others: [b],
    } = await tenantsFor(t, gateway, 1);

    let refusedTotal = 0;
    let cutTotal = 0;
    const accepted = await floodRounds(
      t,
      gateway,
      a,
      150,
      () => stall(gateway, [b], STALLED),
      ({ answers, closed, openMs, peakUploads }, attempt, logFrom) => {
        // B: its part read and cut with 408 within the bound, the excess refused with 429 at once.
        const cut = answers.filter((x) => x?.status === 408);
        const refused = answers.filter((x) => x?.status === 429);
        refusedTotal += refused.length;
        cutTotal += cut.length;
        // The gateway's own measure, from when it had the request's headers: the bound counts from
        // when it began reading the body, just after. The stalling client's measure adds whatever
        // kept the gateway from its headers (seconds, on a busy machine).
        const cutMs = answerTimesLogged(gateway, logFrom, 408);
        const refusedMs = answerTimesLogged(gateway, logFrom, 429);
        const clientCutMs = cut.map((x) => x!.ms).sort((x, y) => x - y);
        const clientRefusedMs = refused.map((x) => x!.ms).sort((x, y) => x - y);
        t.log(
          `attempt ${attempt}: B opened in ${Math.round(openMs)} ms; ${cut.length} cut (408) ${Math.round(cutMs[0])}–${Math.round(cutMs.at(-1)!)} ms ` +
            `after the gateway had their headers (${Math.round(clientCutMs[0])}–${Math.round(clientCutMs.at(-1)!)} ms after B sent them), ` +
            `${refused.length} refused (429) within ${Math.round(refusedMs.at(-1)!)} ms (${Math.round(clientRefusedMs.at(-1)!)} ms after B sent them); ` +
            `at most ${peakUploads} uploads read at once`,
        );
        t.is(
          cut.length + refused.length,
          STALLED,
          `every upload answered 408 or 429: ${answers.filter((x) => x?.status !== 408 && x?.status !== 429).length} were not`,
        );
        t.is(cutMs.length, cut.length, "each cut is in the gateway's request log");
        t.is(refusedMs.length, refused.length, "each refusal is in the gateway's request log");
        t.true(cut.length >= defaults.maxUploadsPerEnvironment, "B's part was read");
        t.true(peakUploads <= defaults.maxUploadsPerEnvironment, `at most B's part read at once (${peakUploads})`);
        // The stated bound: BODY_TIMEOUT_MS plus 1 s per BODY_MIN_BYTES_PER_SECOND received (1 byte here), cut within two checks 250 ms apart.
        const bound = defaults.bodyTimeoutMs + 1000 / defaults.bodyMinBytesPerSecond + CHECKS_MS;
        t.true(cutMs[0] >= defaults.bodyTimeoutMs, `none cut before the body timeout (${Math.round(cutMs[0])} ms)`);
        t.true(
          cutMs.at(-1)! < bound + LOAD_SLACK_MS,
          `every cut within ${Math.round(bound)} ms (+${LOAD_SLACK_MS} ms for load): ${Math.round(cutMs.at(-1)!)} ms`,
        );
        t.true(cutAsSpecified(cut), '408 {"error":"Request timeout"}, Connection: close');
        t.true(refusedAsSpecified(refused), '429 {"error":"Too many requests"}, Retry-After: 1, Connection: close');
        t.true(refusedMs.at(-1)! < 1000, `refused at once, not after waiting (${Math.round(refusedMs.at(-1)!)} ms)`);
        // The stalling process ends only once the gateway closed every connection.
        t.is(closed.length, STALLED, 'every connection of B closed by the gateway');
      },
    );

    // Nothing acknowledged is lost.
    const queued = await queuedMessageIds(h.operator.eventsQueue(), a.environmentId);
    t.is(accepted.filter((c) => !queued.has(c.messageId!)).length, 0, 'every 202 of A is queued');
    const m = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
    t.is(m.get(series(METRIC_NAMES.refusals, { reason: 'uploads_environment' })), refusedTotal);
    t.is(m.get(series(METRIC_NAMES.refusals, { reason: 'uploads' })), 0);
    t.is(m.get(METRIC_NAMES.uploadsCut), cutTotal);
    t.is(m.get(METRIC_NAMES.uploads), 0);
  },
);

test.serial(
  '1,000 stalled uploads of ten environments held for 20 s: their fair shares leave room; an eleventh environment has no 429 and p99 < 100 ms',
  async (t) => {
    if (!enoughOpenFiles(t)) return;
    const gateway = await gatewayFor(t);
    const { a, others } = await tenantsFor(t, gateway, STALLING_TENANTS);

    let refusedTotal = 0;
    let cutTotal = 0;
    const accepted = await floodRounds(
      t,
      gateway,
      a,
      200,
      () => stall(gateway, others, STALLED, HOLD_MS),
      ({ answers, closed, openMs, peakUploads }, attempt, logFrom) => {
        const cut = answers.filter((x) => x?.status === 408);
        const refused = answers.filter((x) => x?.status === 429);
        refusedTotal += refused.length;
        cutTotal += cut.length;
        const cutMs = answerTimesLogged(gateway, logFrom, 408);
        const cutOf = others.map((_, i) => cut.filter((x) => x!.tenant === i).length);
        t.log(
          `attempt ${attempt}: the ten opened ${STALLED} in ${Math.round(openMs)} ms and ${answers.length - STALLED} more over ${HOLD_MS / 1000} s; ` +
            `${cut.length} cut (408) ${Math.round(cutMs[0])}–${Math.round(cutMs.at(-1)!)} ms after the gateway had their headers, ` +
            `per environment ${Math.min(...cutOf)}–${Math.max(...cutOf)}; ${refused.length} refused (429); at most ${peakUploads} uploads read at once`,
        );
        t.is(
          cut.length + refused.length,
          answers.length,
          `every upload answered 408 or 429: ${answers.filter((x) => x?.status !== 408 && x?.status !== 429).length} were not`,
        );
        t.true(answers.length > STALLED, 'uploads opened again as they were answered');
        t.is(cutMs.length, cut.length, "each cut is in the gateway's request log");
        // Each of the ten had uploads read: the room left is shared, not taken by the first to come.
        t.true(
          cutOf.every((n) => n > 0),
          `each stalling environment had uploads read (${cutOf.join(', ')})`,
        );
        t.true(peakUploads <= defaults.maxUploads, `at most MAX_UPLOADS read at once (${peakUploads})`);
        const bound = defaults.bodyTimeoutMs + 1000 / defaults.bodyMinBytesPerSecond + CHECKS_MS;
        t.true(cutMs[0] >= defaults.bodyTimeoutMs, `none cut before the body timeout (${Math.round(cutMs[0])} ms)`);
        t.true(
          cutMs.at(-1)! < bound + LOAD_SLACK_MS,
          `every cut within ${Math.round(bound)} ms (+${LOAD_SLACK_MS} ms for load): ${Math.round(cutMs.at(-1)!)} ms`,
        );
        t.true(cutAsSpecified(cut), '408 {"error":"Request timeout"}, Connection: close');
        t.true(refusedAsSpecified(refused), '429 {"error":"Too many requests"}, Retry-After: 1, Connection: close');
        t.is(closed.length, answers.length, 'every connection closed by the gateway');
      },
    );

    const queued = await queuedMessageIds(h.operator.eventsQueue(), a.environmentId);
    t.is(accepted.filter((c) => !queued.has(c.messageId!)).length, 0, 'every 202 of A is queued');
    const m = samples((await request(gateway.url, '/metrics', { method: 'GET' })).text);
    const refusals = ['uploads_environment', 'uploads'].map((reason) => m.get(series(METRIC_NAMES.refusals, { reason })) ?? 0);
    t.log(`refusals: uploads_environment ${refusals[0]}, uploads ${refusals[1]}`);
    t.is(refusals[0] + refusals[1], refusedTotal, 'each 429 counted');
    t.is(m.get(METRIC_NAMES.uploadsCut), cutTotal);
    t.is(m.get(METRIC_NAMES.uploads), 0);
  },
);
