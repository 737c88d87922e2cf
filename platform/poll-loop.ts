// A background loop that does a round of work every `intervalMs`, at once again while a round
// says there is more, sooner when woken, and backs off (logging now and then) while rounds fail.
// The outbox relay and the journey sweep of the workers run on it.
import { backoffMs } from './backoff.ts';
import type { Logger } from './logger.ts';

export interface PollLoop {
  /** Start the next round now (e.g. on a NOTIFY). */
  wake(): void;
  /** Stop after the round in progress. */
  close(): Promise<void>;
}

const MAX_BACKOFF_MS = 10_000;

/** `round` gets `stopping()`: true once close() was called, so a long round can end early. */
export function startPollLoop(deps: { round: (stopping: () => boolean) => Promise<boolean>; intervalMs: number; log: Logger; what: string }): PollLoop {
  const { round, intervalMs, log, what } = deps;
  let stopped = false;
  const stopping = () => stopped;
  let wake: (() => void) | null = null;

  async function loop() {
    let failures = 0;
    while (!stopped) {
      try {
        const more = await round(stopping);
        failures = 0;
        if (more) continue;
      } catch (err) {
        failures++;
        if (failures === 1 || failures % 30 === 0) log.warn({ err: (err as Error).message, failures }, `${what} failed; retrying`);
      }
      // close() during the round found no wait to cut short: it must not start one.
      if (stopped) break;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, failures ? backoffMs(failures, intervalMs, MAX_BACKOFF_MS) : intervalMs);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  }

  const running = loop();
  return {
    wake: () => wake?.(),
    async close() {
      stopped = true;
      wake?.();
      await running;
    },
  };
}
