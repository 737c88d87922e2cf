// One person's run of a journey as a pure state machine. Every time is a received time on the
// gateway's clock (or a timer's due time), never the moment a worker got to it, so a backlog or
// a restart changes when a step happens, not what happens.
import type { JourneyDefinition, SendChannel } from './journey-definition.ts';

export type RunStatus = 'active' | 'completed' | 'exited';

export interface RunState {
  status: RunStatus;
  /** Index of the current step; steps.length once completed. */
  step: number;
  stepStartedAt: number;
  /** The event a waitUntil step waits for. */
  waitingFor: string | null;
  /** When the current delay ends or wait times out. */
  dueAt: number | null;
  enteredAt: number;
  /** The messageId that started the run (never counts as its own wait, exit or goal). */
  triggerMessageId: string | null;
  /** The messageId that began the current step (a wait's event cannot also end the next wait). */
  stepTriggerId: string | null;
  convertedAt: number | null;
  endedAt: number | null;
}

export interface SendEffect {
  step: number;
  channel: SendChannel;
  template: string;
}

export interface Outcome {
  run: RunState;
  sends: SendEffect[];
  changed: boolean;
}

export interface RunEvent {
  name: string;
  receivedAt: number;
  messageId: string;
}

/** A new run entered at `at`, advanced through every step that does not wait. */
export function startRun(def: JourneyDefinition, at: number, triggerMessageId: string | null): Outcome {
  const run: RunState = {
    status: 'active',
    step: 0,
    stepStartedAt: at,
    waitingFor: null,
    dueAt: null,
    enteredAt: at,
    triggerMessageId,
    stepTriggerId: triggerMessageId,
    convertedAt: null,
    endedAt: null,
  };
  return settle(def, run, []);
}

/**
 * An event of the run's person: it can convert (goal, once, within the window, any status),
 * exit an active run, or end the wait the run is in. Events received before the run entered,
 * or before the current wait began, change nothing.
 */
export function onEvent(def: JourneyDefinition, run: RunState, event: RunEvent): Outcome {
  if (event.receivedAt < run.enteredAt || event.messageId === run.triggerMessageId) return unchanged(run);
  let next = run;
  let changed = false;
  if (def.goal && event.name === def.goal.event && run.convertedAt === null && event.receivedAt <= run.enteredAt + def.goal.windowMs) {
    next = { ...next, convertedAt: event.receivedAt };
    changed = true;
  }
  if (next.status !== 'active') return { run: next, sends: [], changed };
  if (def.exitOn.includes(event.name)) {
    return { run: { ...next, status: 'exited', waitingFor: null, dueAt: null, endedAt: event.receivedAt }, sends: [], changed: true };
  }
  if (
    next.waitingFor === event.name &&
    event.messageId !== next.stepTriggerId &&
    event.receivedAt >= next.stepStartedAt &&
    (next.dueAt === null || event.receivedAt <= next.dueAt)
  ) {
    return settle(def, { ...next, step: next.step + 1, stepStartedAt: event.receivedAt, stepTriggerId: event.messageId, waitingFor: null, dueAt: null }, []);
  }
  return { run: next, sends: [], changed };
}

/** The clock reached `now`: a delay that has ended or a wait that has timed out moves on. */
export function onTimer(def: JourneyDefinition, run: RunState, now: number): Outcome {
  if (run.status !== 'active' || run.dueAt === null || run.dueAt > now) return unchanged(run);
  return settle(def, { ...run, step: run.step + 1, stepStartedAt: run.dueAt, stepTriggerId: null, waitingFor: null, dueAt: null }, []);
}

/**
 * The run moved forward to `until` through the person's events in received order: before each
 * event, the timers due strictly before it (an event at the very moment a wait times out still
 * ends the wait); after the last, the timers due by `until`. Events after `until` are left for later.
 */
export function advance(def: JourneyDefinition, run: RunState, events: readonly RunEvent[], until: number): Outcome {
  let outcome = unchanged(run);
  const timersUpTo = (at: number) => {
    for (let t = onTimer(def, outcome.run, at); t.changed; t = onTimer(def, outcome.run, at)) outcome = merge(outcome, t);
  };
  for (const event of events) {
    if (event.receivedAt > until) break;
    timersUpTo(event.receivedAt - 1);
    outcome = merge(outcome, onEvent(def, outcome.run, event));
  }
  timersUpTo(until);
  return outcome;
}

export function merge(a: Outcome, b: Outcome): Outcome {
  return { run: b.run, sends: [...a.sends, ...b.sends], changed: a.changed || b.changed };
}

/** Runs the steps from the current one until one waits or the journey ends. */
function settle(def: JourneyDefinition, start: RunState, sends: SendEffect[]): Outcome {
  let run = start;
  for (;;) {
    const step = def.steps[run.step];
    if (!step) return { run: { ...run, status: 'completed', waitingFor: null, dueAt: null, endedAt: run.stepStartedAt }, sends, changed: true };
    if ('send' in step) {
      sends.push({ step: run.step, channel: step.send.channel, template: step.send.template });
      run = { ...run, step: run.step + 1 };
    } else if ('delay' in step) {
      return { run: { ...run, dueAt: run.stepStartedAt + step.delay.ms }, sends, changed: true };
    } else {
      const { event, timeoutMs } = step.waitUntil;
      return { run: { ...run, waitingFor: event, dueAt: timeoutMs === null ? null : run.stepStartedAt + timeoutMs }, sends, changed: true };
    }
  }
}

function unchanged(run: RunState): Outcome {
  return { run, sends: [], changed: false };
}

/** Whether an event received after `after` can still change the run: it is active, or its goal may still be reached. */
export function awaitsEvents(def: JourneyDefinition, run: RunState, after: number): boolean {
  if (run.status === 'active') return true;
  return def.goal !== null && run.convertedAt === null && after < run.enteredAt + def.goal.windowMs;
}

/**
 * Whether a person may start another run: never while one is active; after one ended, only
 * when the journey allows reentry.
 */
export function mayEnter(def: JourneyDefinition, runs: readonly { status: RunStatus }[]): boolean {
  if (runs.some((r) => r.status === 'active')) return false;
  return def.reentry || runs.length === 0;
}
