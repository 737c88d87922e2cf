// A multi-process gateway's arithmetic: GATEWAY_PROCESSES, each process's share of the
// gateway's bounds, its JSON threads, its heap, and the pause before a dead process is replaced.
import { execFile } from 'node:child_process';
import { availableParallelism } from 'node:os';
import test from 'ava';
import { loadConfig } from '../../platform/config.ts';
import { processHeap, restartDelayMs } from '../../gateway/cluster/primary.ts';
import { jsonThreadsPerProcess, processConfig, shareOf } from '../../gateway/cluster/share.ts';

test('GATEWAY_PROCESSES: one process by default, auto is one per core; a count from 1; anything else is refused', (t) => {
  t.is(loadConfig({}).gatewayProcesses, 1);
  t.is(loadConfig({ GATEWAY_PROCESSES: 'auto' }).gatewayProcesses, availableParallelism());
  t.is(loadConfig({ GATEWAY_PROCESSES: '1' }).gatewayProcesses, 1);
  t.is(loadConfig({ GATEWAY_PROCESSES: '3' }).gatewayProcesses, 3);
  for (const raw of ['0', '', 'AUTO', '-1', '2.5', '257'])
    t.throws(
      () => loadConfig({ GATEWAY_PROCESSES: raw }),
      { message: /GATEWAY_PROCESSES=".*": must be auto or an integer from 1 to 256/ },
      JSON.stringify(raw),
    );
});

test('each process takes its share of the gateway-wide bounds, rounded up; batch sizes stay as set', (t) => {
  const config = loadConfig({
    DATABASE_POOL_SIZE: '10',
    MAX_IN_FLIGHT: '1000',
    IDENTIFY_BATCHES_IN_FLIGHT: '3',
    TRACK_BATCH_MAX: '256',
    IDENTIFY_BATCH_MAX: '64',
    IDENTIFY_CACHE_MB: '64',
    KEY_CACHE_MB: '16',
  });
  t.is(processConfig(config, 1), config, 'one process: the configuration itself');
  const two = processConfig(config, 2);
  t.like(two, {
    databasePoolSize: 5,
    maxInFlight: 500,
    identifyBatchesInFlight: 2,
    identifyCacheMb: 32,
    keyCacheMb: 8,
    trackBatchMax: 256,
    identifyBatchMax: 64,
  });
  // The fairness bounds (defaults 250, 500, 100) divide the same way, so an environment's part keeps its proportion.
  t.like(two, { maxInFlightPerEnvironment: 125, maxUploads: 250, maxUploadsPerEnvironment: 50, bodyTimeoutMs: config.bodyTimeoutMs });
  const three = processConfig(config, 3);
  t.like(three, {
    databasePoolSize: 4,
    maxInFlight: 334,
    identifyBatchesInFlight: 1,
    identifyCacheMb: 22,
    keyCacheMb: 6,
    maxInFlightPerEnvironment: 84,
    maxUploads: 167,
    maxUploadsPerEnvironment: 34,
  });
  t.like(processConfig(loadConfig({ IDENTIFY_CACHE_MB: '0' }), 4), { identifyCacheMb: 0 }, 'no cache stays none');
  // Never 0, and at most processes − 1 over the configured total.
  for (const processes of [1, 2, 3, 7, 16, 64])
    for (const total of [1, 2, 3, 10, 1000]) {
      const share = shareOf(total, processes);
      t.true(share >= 1);
      t.true(share * processes >= total && share * processes <= total + processes - 1, `${total} over ${processes}`);
    }
});

test('JSON threads: one process keeps the pool default; processes on every core get one each', (t) => {
  t.is(jsonThreadsPerProcess(2, 1), 1);
  t.is(jsonThreadsPerProcess(8, 1), 4);
  t.is(jsonThreadsPerProcess(2, 2), 1);
  t.is(jsonThreadsPerProcess(8, 8), 1);
  t.is(jsonThreadsPerProcess(8, 2), 3);
  t.is(jsonThreadsPerProcess(64, 4), 4);
});

test('a dead process is replaced after 250 ms, doubling with each other death in the last minute, at most 30 s', (t) => {
  t.deepEqual([1, 2, 3, 4, 5, 6, 7, 8, 20].map(restartDelayMs), [250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000]);
});

test("each process's heap: the young generation as GATEWAY_SEMI_SPACE_MB asks, the old generation capped for its share of the caches", (t) => {
  t.deepEqual(processHeap(loadConfig({ GATEWAY_PROCESSES: '2' })), {
    youngGenerationMb: 96,
    oldGenerationMb: 512,
    flags: ['--max-semi-space-size=32', '--max-old-space-size=512', '--heap-growing-percent=100'],
  });
  // Shares of 100 + 8 MB: 256 + 3 × 108. The whole caches' 216 MB would give 904.
  t.like(processHeap(loadConfig({ GATEWAY_PROCESSES: '2', IDENTIFY_CACHE_MB: '200', KEY_CACHE_MB: '16' })), { oldGenerationMb: 580 });
  t.like(processHeap(loadConfig({ GATEWAY_PROCESSES: '4', IDENTIFY_CACHE_MB: '1024', KEY_CACHE_MB: '16' })), { oldGenerationMb: 1036 });
  t.deepEqual(
    processHeap(loadConfig({ GATEWAY_PROCESSES: '2', GATEWAY_SEMI_SPACE_MB: '0' })),
    { youngGenerationMb: null, oldGenerationMb: 512, flags: ['--max-old-space-size=512', '--heap-growing-percent=100'] },
    'node keeps its young generation; the old one is capped all the same',
  );
});

test("a process started with them has that heap, over the primary's own flag and NODE_OPTIONS", async (t) => {
  const heap = processHeap(loadConfig({ GATEWAY_PROCESSES: '2', IDENTIFY_CACHE_MB: '200', KEY_CACHE_MB: '16' }));
  // As cluster.fork starts one: the primary's execArgv, then the heap's flags.
  const limitMb = await new Promise<number>((resolve, reject) =>
    execFile(
      process.execPath,
      ['--max-old-space-size=2000', ...heap.flags, '-p', "require('node:v8').getHeapStatistics().heap_size_limit"],
      { env: { ...process.env, NODE_OPTIONS: '--max-old-space-size=100' } },
      (err, stdout) => (err ? reject(err) : resolve(Number(stdout) / 1_048_576)),
    ),
  );
  // V8's heap limit is the old generation and the young one (three semi-spaces).
  t.true(limitMb >= 580 && limitMb <= 580 + 96 + 32, `heap limit ${limitMb} MB`);
});
