// The journey engine. Track events (after they are stored) and profile changes (from the
// outbox) start runs; a run then moves only in received-time order, and only up to the
// watermark: the time before which no event can still be on its way (queued, being stored,
// or inside a gateway's group commit). So a backlog or a restart changes when a step happens,
// never what happens: an exit received a moment before a delay ends still prevents the send,
// however late the worker gets to it. The rules are the pure state machine of
// journeys/journey-run.ts; this module loads, locks and saves around it.
import type { Db, Tx } from '../platform/db.ts';
import { eventNamesOf } from './journey-definition.ts';
import { advance, awaitsEvents, mayEnter, startRun, type Outcome } from './journey-run.ts';
import { toPgText } from '../platform/pg-text.ts';
import { gateSend, sendAddress } from './send-gate.ts';
import type { Logger } from '../platform/logger.ts';
import type { ServiceEventJob } from '../events/jobs.ts';
import type { EventRow } from '../events/event-store.ts';
import {
  claimEvent,
  handledEvents,
  inPersonLock,
  insertRun,
  lockRun,
  lockRuns,
  nextHandledEvent,
  profileFields,
  recordSend,
  saveRun,
  wakeRun,
  wakingRuns,
  type StoredRun,
  type WakingRun,
} from './run-store.ts';
import { findDecision } from '../identify/decision-store.ts';
import { droppedChange } from '../privacy/suppression.ts';
import { userKeyOf } from '../profiles/person.ts';
import { attributeJourneys, journeyDefinition, publishedJourneys, type PublishedJourney } from './journey-store.ts';

export interface JourneyEngine {
  /** Stored Track events, while the worker's store holds their environments' locks (erasure.ts ErasureGuard); one error (or null) per row. */
  handleEvents(rows: readonly EventRow[]): Promise<(Error | null)[]>;
  /** A `profile_fields_changed` service event: starts attribute-triggered journeys. */
  handleProfileChange(job: ServiceEventJob): Promise<void>;
  /** Moves runs on up to the watermark (their timers, the events waiting for them); returns how many it moved. */
  evaluateRuns(limit?: number): Promise<number>;
}

/** What the engine counts (workers/metrics.ts). */
export interface JourneyCounters {
  journeyEntries: { inc(): void };
  journeyMessages: { inc(labels: { status: string }): void };
  journeyTimers: { inc(): void };
}

export interface JourneyEngineDeps {
  db: Db;
  log: Logger;
  /** Received time up to which every event has been handled (workers/watermark.ts). */
  watermark: () => Promise<number>;
  /** A cheap upper bound of the watermark (the clock less the grace), to skip the real one when nothing is due. */
  horizon: () => number;
  metrics?: JourneyCounters;
}

/** Runs one sweep evaluates at most. */
export const SWEEP_PAGE = 200;

/** How many people's transactions run at once (each holds a pooled connection). */
const PARALLEL_PEOPLE = 4;

export function createJourneyEngine(deps: JourneyEngineDeps): JourneyEngine {
  const { db, log, metrics } = deps;

  /** A new run when the person may have one. Its first steps run now (nothing received before the entry can change them); the rest waits for the watermark. */
  async function enter(tx: Tx, journey: PublishedJourney, userKey: string, runs: StoredRun[], trigger: { key: string; at: number; messageId: string | null }) {
    const def = journey.definition;
    const earlier = runs.filter((r) => r.journeyId === journey.id).map((r) => r.state);
    if (!mayEnter(def, earlier)) return;
    const outcome = startRun(def, trigger.at, trigger.messageId);
    const id = await insertRun(tx, {
      journeyId: journey.id,
      environmentId: journey.environmentId,
      userKey,
      triggerKey: trigger.key,
      once: !def.reentry,
      state: outcome.run,
      // Evaluated once the watermark passes the entry: events of the person handled before the run existed.
      wakeAt: outcome.run.status === 'active' ? trigger.at : null,
    });
    if (id === null) return;
    metrics?.journeyEntries.inc();
    await send(tx, journey.environmentId, userKey, { id, journeyId: journey.id }, outcome);
    log.info({ journeyId: journey.id, runId: id, messageId: trigger.messageId, status: outcome.run.status, step: outcome.run.step }, 'journey entered');
  }

  async function send(tx: Tx, environmentId: string, userKey: string, run: { id: string; journeyId: string }, outcome: Outcome) {
    if (!outcome.sends.length) return;
    const fields = await profileFields(tx, environmentId, userKey);
    const at = Date.now();
    for (const effect of outcome.sends) {
      const address = sendAddress(effect.channel, fields);
      const consent = address === null ? null : await findDecision(tx, environmentId, effect.channel, 'marketing', address);
      const verdict = gateSend(fields, address, consent, at);
      await recordSend(tx, run.id, run.journeyId, effect, verdict);
      metrics?.journeyMessages.inc({ status: verdict.status });
    }
  }

  async function handleEvent(row: EventRow, journeys: PublishedJourney[]) {
    const userKey = userKeyOf(row.userId!);
    // handleEvents runs inside the worker's store, which holds the environment's lock (erasure.ts ErasureGuard).
    await inPersonLock(
      db,
      row.environmentId,
      userKey,
      async (tx) => {
        // The stored row's received time is the first acceptance's, whichever delivery this is.
        const receivedAt = await claimEvent(tx, { ...row, userId: row.userId! }, userKey);
        if (receivedAt === null) return;
        const live = journeys.filter((j) => j.publishedAt <= receivedAt);
        if (!live.length) return;
        const ids = live.map((j) => j.id);
        const runs = await lockRuns(tx, row.environmentId, userKey, ids);
        for (const journey of live) {
          for (const run of runs.filter((r) => r.journeyId === journey.id)) {
            // Applied in received order by the next evaluation, after any timer due before it;
            // an ended run is woken too while its goal may still be reached.
            if (awaitsEvents(journey.definition, run.state, receivedAt - 1)) await wakeRun(tx, run.id, receivedAt);
          }
          const entry = journey.definition.entry;
          if ('event' in entry && entry.event === row.event) {
            await enter(tx, journey, userKey, runs, { key: `e:${toPgText(row.messageId)}`, at: receivedAt, messageId: row.messageId });
          }
        }
      },
      { environmentHeld: true },
    );
  }

  async function handleEvents(rows: readonly EventRow[]): Promise<(Error | null)[]> {
    const results: (Error | null)[] = rows.map(() => null);
    // drivesJourneys is the rule's answer (journey-limits.ts mayDriveJourneys: a userId, within the limits).
    const candidates = rows.map((row, i) => ({ row, i })).filter(({ row }) => row.drivesJourneys && row.status === 'processed');
    if (!candidates.length) return results;
    const journeys = await publishedJourneys(db, [...new Set(candidates.map((c) => c.row.environmentId))]);
    if (!journeys.length) return results;

    // One person's events in received order, one after another; different people side by side.
    const byPerson = new Map<string, { row: EventRow; i: number; journeys: PublishedJourney[] }[]>();
    for (const c of candidates) {
      const uses = journeys.filter((j) => j.environmentId === c.row.environmentId && j.eventNames.has(c.row.event));
      if (!uses.length) continue;
      const person = `${c.row.environmentId}\0${userKeyOf(c.row.userId!)}`;
      const list = byPerson.get(person) ?? byPerson.set(person, []).get(person)!;
      list.push({ ...c, journeys: uses });
    }
    const queues = [...byPerson.values()].map((list) => list.sort((a, b) => a.row.receivedAt - b.row.receivedAt));
    await inParallel(queues, async (list) => {
      for (const item of list) {
        try {
          await handleEvent(item.row, item.journeys);
        } catch (err) {
          results[item.i] = err as Error;
        }
      }
    });
    return results;
  }

  async function handleProfileChange(job: ServiceEventJob) {
    const payload = JSON.parse(job.payload) as { userId?: unknown; changed?: Record<string, unknown> };
    if (typeof payload.userId !== 'string' || !payload.userId.trim() || !payload.changed) return;
    const changed = Object.keys(payload.changed);
    const journeys = (await attributeJourneys(db, job.environmentId)).filter(
      (j) => j.publishedAt <= job.createdAt && (j.entryTrait === '*' || changed.includes(j.entryTrait!)),
    );
    if (!journeys.length) return;
    const userKey = userKeyOf(payload.userId);
    await inPersonLock(db, job.environmentId, userKey, async (tx) => {
      // Under the environment's lock, which an erasure takes exclusively: a change made before the person was erased starts nothing.
      if (await droppedChange(tx, job.environmentId, userKey, job.createdAt)) return;
      const ids = journeys.map((j) => j.id);
      const runs = await lockRuns(tx, job.environmentId, userKey, ids);
      for (const journey of journeys) await enter(tx, journey, userKey, runs, { key: `o:${job.outboxId}`, at: job.createdAt, messageId: null });
    });
  }

  /** Moves one run through its timers and the person's handled events, in received order, up to `until`. */
  async function evaluate(waking: WakingRun, until: number) {
    const def = await journeyDefinition(db, waking.journeyId);
    const names = eventNamesOf(def);
    await inPersonLock(db, waking.environmentId, waking.userKey, async (tx) => {
      const run = await lockRun(tx, waking.id);
      if (!run || run.wakeAt === null || run.wakeAt > until) return;
      // Every event before the current step began has been applied (the watermark passed it).
      const events = await handledEvents(tx, waking.environmentId, waking.userKey, names, run.state.stepStartedAt, until);
      const outcome = advance(def, run.state, events, until);
      // Events already handled but received after `until` (a goal right behind the event that
      // ended the run, say) wake the run again once the watermark passes them.
      const pending = awaitsEvents(def, outcome.run, until) ? await nextHandledEvent(tx, waking.environmentId, waking.userKey, names, until) : null;
      const next = outcome.run.status === 'active' ? earliest(outcome.run.dueAt, pending) : pending;
      await saveRun(tx, run.id, outcome.run, next);
      await send(tx, waking.environmentId, waking.userKey, run, outcome);
      if (outcome.run.step !== run.state.step || outcome.run.status !== run.state.status) metrics?.journeyTimers.inc();
    });
  }

  async function evaluateRuns(limit = SWEEP_PAGE): Promise<number> {
    // Most sweeps find nothing: ask Redis for the watermark only when some run may be due.
    const candidates = await wakingRuns(db, deps.horizon(), limit);
    if (!candidates.length) return 0;
    const until = await deps.watermark();
    const due = candidates.filter((c) => c.wakeAt <= until);
    await inParallel(due, (w) =>
      evaluate(w, until).catch((err: Error) => log.warn({ runId: w.id, err: err.message }, 'journey run not evaluated; retrying on the next sweep')),
    );
    return due.length;
  }

  return { handleEvents, handleProfileChange, evaluateRuns };
}

function earliest(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : Math.min(a, b);
}

async function inParallel<T>(items: T[], work: (item: T) => Promise<unknown>): Promise<void> {
  const queue = [...items];
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL_PEOPLE, queue.length) }, async () => {
      for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
    }),
  );
}
