// Journey timers are rows (journey_runs.due_at, wake_at), not in-memory timeouts: every worker
// sweeps for runs to move on, so a delay or a wait's timeout survives restarts and fires on
// whichever worker is up. The person's lock makes a run advance once even when two workers
// find it together.
import type { Logger } from '../platform/logger.ts';
import { startPollLoop } from '../platform/poll-loop.ts';
import { SWEEP_PAGE, type JourneyEngine } from '../journeys/engine.ts';

export function startJourneyTimers(deps: { engine: Pick<JourneyEngine, 'evaluateRuns'>; tickMs: number; log: Logger }): { close(): Promise<void> } {
  // A full page means more are due: go again at once.
  return startPollLoop({ round: async () => (await deps.engine.evaluateRuns()) >= SWEEP_PAGE, intervalMs: deps.tickMs, log: deps.log, what: 'journey sweep' });
}
