/**
 * Runs each close in turn, none for longer than `eachMs`. A close that hangs (BullMQ's close
 * can wait forever on a connection left reconnecting to a node that was down:
 * taskforcesh/bullmq#4656) is named on stderr and left behind, so the later steps still stop
 * the servers the file started and ava's worker exits instead of timing out. The processes
 * themselves are bounded the same way by SHUTDOWN_TIMEOUT_MS (cli/intake.ts).
 */
export async function closeInTurn(steps: [label: string, close: () => unknown][], eachMs = 20_000): Promise<void> {
  for (const [label, close] of steps) {
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), eachMs)));
    const outcome = await Promise.race([Promise.resolve().then(close), hung]).catch((err: unknown) => err);
    clearTimeout(timer);
    if (outcome === 'hung') process.stderr.write(`teardown: ${label} did not close within ${eachMs} ms; going on\n`);
    else if (outcome instanceof Error) process.stderr.write(`teardown: ${label} failed to close: ${outcome.message}\n`);
  }
}
