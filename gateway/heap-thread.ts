// `intake gateway` as one process runs its gateway on a worker thread of that process, for
// the thread's heap: its young generation can be sized there (resourceLimits), where a running
// process cannot resize its own (`--max-semi-space-size` is a node flag read at start-up).
// Measured (docs/operations.md): with node's default the gateway's requests die young only
// part of the time; the scavenges copy and promote the ~50 requests in flight, and the same
// build runs Track at 22 K or 31 K req/s by process, p99 4 to 10 ms. With 32 MB every process
// runs fast. The process, its pid and its signals are the same either way: the main thread only
// forwards SIGTERM/SIGINT and exits with the thread's code.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const MARK = 'intakeGatewayThread';

/** This code runs on the gateway's thread (started by runOnGatewayThread). */
export const onGatewayThread = !isMainThread && (workerData as Record<string, unknown> | null)?.[MARK] === true;

/** V8 sizes a young generation as three semi-spaces (two for the scavenger, one for new large objects). */
const youngGenerationMb = (semiSpaceMb: number) => semiSpaceMb * 3;

/** Runs `intake <argv>` on a thread whose semi-space is `semiSpaceMb`; resolves with its exit code. */
export function runOnGatewayThread(argv: string[], semiSpaceMb: number): Promise<number> {
  // The `intake` command this process was started as (bin/intake.js): the thread chooses the
  // same code to run (the build or the sources, bin/sources.js) from the same environment.
  const thread = new Worker(process.argv[1], {
    argv,
    workerData: { [MARK]: true },
    resourceLimits: { maxYoungGenerationSizeMb: youngGenerationMb(semiSpaceMb) },
  });
  // Signals reach the main thread only: the first of each is the thread's cue to drain and stop
  // (cli/intake.ts absorbs the later ones while it does).
  const forward = (signal: NodeJS.Signals) => thread.postMessage({ signal });
  process.once('SIGTERM', forward);
  process.once('SIGINT', forward);
  return new Promise((resolve) => {
    // An uncaught error ends the thread (with code 1): its line is the thread's last word.
    thread.on('error', (err) => process.stderr.write(`intake: ${err.name}: ${err.message}\n`));
    thread.on('exit', (code) => resolve(code));
  });
}

/** On the gateway's thread: the signal the main thread forwards. */
export function signalFromMainThread(): Promise<string> {
  return new Promise((resolve) => parentPort!.once('message', (m: { signal: string }) => resolve(m.signal)));
}
