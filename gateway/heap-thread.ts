// `intake gateway` as one process runs its gateway on a worker thread of that process, for
// the thread's heap: its young generation can be sized there (resourceLimits), where a running
// process cannot resize its own (`--max-semi-space-size` is a node flag read at start-up).
// Measured (docs/operations.md): with node's default the gateway's requests die young only
// part of the time; the scavenges copy and promote the ~50 requests in flight, and the same
// build runs Track at 22 K or 31 K req/s by process, p99 4 to 10 ms. With 32 MB every process
// runs fast. The process, its pid and its signals are the same either way: the main thread only
// forwards SIGTERM/SIGINT and exits with the thread's code.
//
// Its old generation is capped too (oldGenerationMb), for the memory bound of
// docs/reliability.md: V8 collects an old generation once it has grown to a multiple of what is
// live, and under node's default cap (4 GB on a machine of 16 GB or more) that multiple may be
// 4: with the default caches, 130 MB past the bound at the soak's peak. The processes of a
// multi-process gateway get the same heap as node flags (gatewayHeapFlags), for their share of
// the caches.
//
// And its old generation grows to twice what is live between full collections
// (OLD_GENERATION_GROWTH_FLAG), where V8's own factor is about 1.4 under the cap. Under Identify
// the profile cache's entries live about a second (while the users cycle) and are promoted, ~800
// bytes a call: at V8's factor a mark-compact came every ~2 s, each with 4–12 ms of pause and as
// much again of marking steps on the thread, every connection's call held meanwhile, and that was
// Identify's p99 (docs/performance.md). At 2 they come every ~6 s. The memory bound does not
// move: V8 never grows past halfway from what is live to the cap, whatever the factor.
import v8 from 'node:v8';
import { isMainThread, parentPort, Worker, workerData, type ResourceLimits } from 'node:worker_threads';

const MARK = 'intakeGatewayThread';

/** This code runs on the gateway's thread (started by runOnGatewayThread). */
export const onGatewayThread = !isMainThread && (workerData as Record<string, unknown> | null)?.[MARK] === true;

/** V8 sizes a young generation as three semi-spaces (two for the scavenger, one for new large objects). */
export const youngGenerationMb = (semiSpaceMb: number) => semiSpaceMb * 3;

/**
 * Room for what the old generation holds besides the caches: the code and its state (about
 * 40 MB live) and the requests in flight (a few MB at ordinary sizes; the worst-shaped bodies of
 * test/faults/bounded-work.test.ts, four Identify calls of 4 MB and four Track bodies at once,
 * peak at 165 MB on the gateway's heap).
 */
const OLD_GENERATION_FLOOR_MB = 512;

/** V8's flag for its old-generation growth factor (1 + percent / 100): process-wide, read at each full collection. */
export const OLD_GENERATION_GROWTH_FLAG = '--heap-growing-percent=100';

/**
 * The gateway's old generation, in MB, for caches of `cachesMb` (IDENTIFY_CACHE_MB +
 * KEY_CACHE_MB): 256 MB and three times the caches, at least the floor. The gateway's old
 * generation grows to twice what is live before a full collection (OLD_GENERATION_GROWTH_FLAG;
 * V8's own factor under such a cap is 1.3 to 2), and never past halfway from what is live to
 * its cap. A cache MB adds at most 1 MB live and 3 MB of cap: halfway, 2 MB between
 * collections, the bound's factor, whatever the multiple. And the caches never bring what is
 * live near the cap: they leave 256 MB and twice themselves for the rest.
 */
export function oldGenerationMb(cachesMb: number): number {
  return Math.max(OLD_GENERATION_FLOOR_MB, 256 + 3 * cachesMb);
}

/** The gateway thread's heap: its young generation as GATEWAY_SEMI_SPACE_MB asks, its old generation for its caches. */
export function gatewayHeapLimits(semiSpaceMb: number, cachesMb: number): ResourceLimits {
  return { maxYoungGenerationSizeMb: youngGenerationMb(semiSpaceMb), maxOldGenerationSizeMb: oldGenerationMb(cachesMb) };
}

/**
 * The same heap for a gateway process of its own (GATEWAY_PROCESSES > 1), as the node flags it is
 * started with: a semi-space of 0 leaves its young generation to node, and its old generation is
 * capped all the same, as the bound needs it whatever the young generation.
 */
export function gatewayHeapFlags(semiSpaceMb: number, cachesMb: number): string[] {
  const semiSpace = semiSpaceMb > 0 ? [`--max-semi-space-size=${semiSpaceMb}`] : [];
  return [...semiSpace, `--max-old-space-size=${oldGenerationMb(cachesMb)}`, OLD_GENERATION_GROWTH_FLAG];
}

/**
 * Runs `intake <argv>` on a thread whose semi-space is `semiSpaceMb` and whose old generation
 * fits caches of `cachesMb` (IDENTIFY_CACHE_MB + KEY_CACHE_MB); resolves with its exit code.
 */
export function runOnGatewayThread(argv: string[], semiSpaceMb: number, cachesMb: number): Promise<number> {
  // The `intake` command this process was started as (bin/intake.js): the thread chooses the
  // same code to run (the build or the sources, bin/sources.js) from the same environment.
  // V8's flags are the process's: set here, the growth factor holds for the thread's heap too.
  v8.setFlagsFromString(OLD_GENERATION_GROWTH_FLAG);
  const thread = new Worker(process.argv[1], { argv, workerData: { [MARK]: true }, resourceLimits: gatewayHeapLimits(semiSpaceMb, cachesMb) });
  // Signals reach the main thread only: the first of each is the thread's cue to drain and stop
  // (cli/intake.ts absorbs the later ones while it does).
  const forward = (signal: NodeJS.Signals) => thread.postMessage({ signal });
  process.once('SIGTERM', forward);
  process.once('SIGINT', forward);
  return new Promise((resolve) => {
    // An uncaught error ends the thread (with code 1): its line is the thread's last word.
    // So does a heap past its cap (ERR_WORKER_OUT_OF_MEMORY): the process exits, its supervisor restarts it.
    thread.on('error', (err) => process.stderr.write(`intake: ${err.name}: ${err.message}\n`));
    thread.on('exit', (code) => resolve(code));
  });
}

/** On the gateway's thread: the signal the main thread forwards. */
export function signalFromMainThread(): Promise<string> {
  return new Promise((resolve) => parentPort!.once('message', (m: { signal: string }) => resolve(m.signal)));
}
