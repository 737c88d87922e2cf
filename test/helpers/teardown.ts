import { withTimeout } from '../../platform/with-timeout.ts';

/**
 * Runs each close in turn, none for longer than `eachMs`. A close that hangs (BullMQ's close
 * can wait forever on a connection left reconnecting to a node that was down:
 * taskforcesh/bullmq#4656) or fails is named on stderr and left behind, so the later steps still
 * stop the servers the file started and ava's worker exits instead of timing out. The processes
 * themselves are bounded the same way by SHUTDOWN_TIMEOUT_MS (cli/intake.ts).
 */
export async function closeInTurn(steps: [label: string, close: () => unknown][], eachMs = 20_000): Promise<void> {
  for (const [label, close] of steps) {
    await withTimeout(Promise.resolve().then(close), eachMs, `did not close within ${eachMs} ms`).catch((err: unknown) =>
      process.stderr.write(`teardown: ${label}: ${(err as Error)?.message ?? err}; going on\n`),
    );
  }
}
