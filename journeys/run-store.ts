// Journey runs in PostgreSQL. Everything that changes a person's runs happens in one
// transaction holding that person's journey lock (person.ts), taken before any row lock, so
// events, timers and profile changes for one person apply one at a time on any number of workers.
import type { Db, Tx } from '../platform/db.ts';
import { environmentLock, journeyLock, LOCK_SHARED_SQL, LOCK_SQL, lockParam, userHashOf } from '../profiles/person.ts';

import type { RunEvent, RunState, RunStatus } from './journey-run.ts';
import { hashStored } from '../platform/identity-hash.ts';
import { fromPgText, toPgText } from '../platform/pg-text.ts';
import type { SendVerdict } from './send-gate.ts';

export interface StoredRun {
  id: string;
  journeyId: string;
  state: RunState;
  wakeAt: number | null;
}

interface RunRow {
  id: string;
  journey_id: string;
  status: string;
  step: number;
  step_started_at: bigint;
  waiting_for: string | null;
  due_at: bigint | null;
  entered_at: bigint;
  trigger_key: string;
  step_trigger: string | null;
  wake_at: bigint | null;
  converted_at: bigint | null;
  ended_at: bigint | null;
}

const num = (v: bigint | null) => (v === null ? null : Number(v));
const big = (v: number | null) => (v === null ? null : BigInt(v));

function toRun(r: RunRow): StoredRun {
  return {
    id: r.id,
    journeyId: r.journey_id,
    wakeAt: num(r.wake_at),
    state: {
      status: r.status as RunStatus,
      step: r.step,
      stepStartedAt: Number(r.step_started_at),
      waitingFor: r.waiting_for === null ? null : fromPgText(r.waiting_for),
      dueAt: num(r.due_at),
      enteredAt: Number(r.entered_at),
      triggerMessageId: r.trigger_key.startsWith('e:') ? fromPgText(r.trigger_key.slice(2)) : null,
      stepTriggerId: r.step_trigger === null ? null : fromPgText(r.step_trigger),
      convertedAt: num(r.converted_at),
      endedAt: num(r.ended_at),
    },
  };
}

/**
 * A transaction holding the person's journey lock (the trimmed, escaped userId of one
 * environment), after the environment's lock shared (person.ts: an erasure waits for it, and
 * this for an erasure). `environmentHeld`: the caller's transaction holds that already (the
 * worker's store, erasure.ts ErasureGuard); taking it again here, on another connection, would
 * queue behind an erasure waiting for the caller.
 */
export function inPersonLock<T>(
  db: Db,
  environmentId: string,
  userKey: string,
  work: (tx: Tx) => Promise<T>,
  { environmentHeld = false }: { environmentHeld?: boolean } = {},
): Promise<T> {
  return db.$transaction(
    async (tx) => {
      if (!environmentHeld) await tx.$executeRawUnsafe(LOCK_SHARED_SQL, lockParam([environmentLock(environmentId)]));
      await tx.$executeRawUnsafe(LOCK_SQL, lockParam([journeyLock(environmentId, userKey)]));
      return work(tx);
    },
    { maxWait: 10_000, timeout: 30_000 },
  );
}

/**
 * Marks a stored event as handled by the journey engine and returns its received time, or
 * null when there is nothing to handle: handled already (a redelivered job, a duplicate
 * messageId), or the stored event is not this one (a reused messageId with another name,
 * user or size: the first event stored is the event, and its own job handles it).
 */
export async function claimEvent(
  tx: Tx,
  event: { environmentId: string; messageId: string; event: string; userId: string },
  userKey: string,
): Promise<number | null> {
  const messageKey = toPgText(event.messageId);
  const rows = await tx.$queryRaw<{ received_at: Date }[]>`
    UPDATE events SET journeys_at = now(), journey_user = ${userKey}
    WHERE environment_id = ${event.environmentId}::uuid AND message_hash = ${hashStored(messageKey)} AND message_id = ${messageKey} AND journeys_at IS NULL
      AND received_at = (SELECT received_at FROM event_ids WHERE environment_id = ${event.environmentId}::uuid AND message_hash = ${hashStored(messageKey)})
      AND event = ${toPgText(event.event)} AND user_id = ${toPgText(event.userId)} AND drives_journeys AND status = 'processed'
    RETURNING received_at`;
  return rows[0]?.received_at.getTime() ?? null;
}

/** The person's runs of these journeys, locked. */
export async function lockRuns(tx: Tx, environmentId: string, userKey: string, journeyIds: string[]): Promise<StoredRun[]> {
  const rows = await tx.$queryRaw<RunRow[]>`
    SELECT * FROM journey_runs
    WHERE environment_id = ${environmentId}::uuid AND user_hash = ${hashStored(userKey)} AND user_id = ${userKey} AND journey_id = ANY(${journeyIds}::uuid[])
    ORDER BY entered_at, id FOR UPDATE`;
  return rows.map(toRun);
}

export async function lockRun(tx: Tx, id: string): Promise<StoredRun | null> {
  const rows = await tx.$queryRaw<RunRow[]>`SELECT * FROM journey_runs WHERE id = ${id}::uuid FOR UPDATE`;
  return rows[0] ? toRun(rows[0]) : null;
}

/**
 * A new run, or null when the person may not have one after all (the trigger already started
 * one, a run is active, or the journey forbids reentry): the unique indexes decide under races.
 */
export async function insertRun(
  tx: Tx,
  run: { journeyId: string; environmentId: string; userKey: string; triggerKey: string; once: boolean; state: RunState; wakeAt: number | null },
): Promise<string | null> {
  const s = run.state;
  const userHash = hashStored(run.userKey);
  const rows = await tx.$queryRaw<{ id: string }[]>`
    INSERT INTO journey_runs (id, journey_id, environment_id, user_id, user_hash, trigger_key, trigger_hash, once_key, status, step, step_started_at,
                              waiting_for, due_at, entered_at, converted_at, ended_at, wake_at, step_trigger)
    VALUES (gen_random_uuid(), ${run.journeyId}::uuid, ${run.environmentId}::uuid, ${run.userKey}, ${userHash}, ${run.triggerKey}, ${hashStored(run.triggerKey)},
            ${run.once ? userHash : null}, ${s.status}, ${s.step}, ${BigInt(s.stepStartedAt)}, ${s.waitingFor === null ? null : toPgText(s.waitingFor)},
            ${big(s.dueAt)}, ${BigInt(s.enteredAt)}, ${big(s.convertedAt)}, ${big(s.endedAt)}, ${big(run.wakeAt)},
            ${s.stepTriggerId === null ? null : toPgText(s.stepTriggerId)})
    ON CONFLICT DO NOTHING RETURNING id`;
  return rows[0]?.id ?? null;
}

export async function saveRun(tx: Tx, id: string, s: RunState, wakeAt: number | null): Promise<void> {
  await tx.$executeRaw`
    UPDATE journey_runs SET status = ${s.status}, step = ${s.step}, step_started_at = ${BigInt(s.stepStartedAt)},
      waiting_for = ${s.waitingFor === null ? null : toPgText(s.waitingFor)}, due_at = ${big(s.dueAt)},
      converted_at = ${big(s.convertedAt)}, ended_at = ${big(s.endedAt)}, wake_at = ${big(wakeAt)},
      step_trigger = ${s.stepTriggerId === null ? null : toPgText(s.stepTriggerId)}, updated_at = now()
    WHERE id = ${id}::uuid`;
}

/** An event of the person at `at` waits to be applied: evaluate the run by then at the latest. */
export async function wakeRun(tx: Tx, id: string, at: number): Promise<void> {
  await tx.$executeRaw`UPDATE journey_runs SET wake_at = LEAST(COALESCE(wake_at, ${BigInt(at)}), ${BigInt(at)}) WHERE id = ${id}::uuid`;
}

/** Events of the person the engine has handled, received from `since` to `until`, in received order. */
export async function handledEvents(
  tx: Tx,
  environmentId: string,
  userKey: string,
  names: readonly string[],
  since: number,
  until: number,
): Promise<RunEvent[]> {
  const rows = await tx.$queryRaw<{ event: string; message_id: string; received_at: Date }[]>`
    SELECT event, message_id, received_at FROM events
    WHERE environment_id = ${environmentId}::uuid AND journey_user = ${userKey}
      AND received_at >= ${new Date(since)} AND received_at <= ${new Date(until)}
      AND event = ANY(${names.map(toPgText)}::text[])
    ORDER BY received_at, id`;
  return rows.map((r) => ({ name: fromPgText(r.event), messageId: fromPgText(r.message_id), receivedAt: r.received_at.getTime() }));
}

/** The received time of the person's first handled event after `after`, if any. */
export async function nextHandledEvent(tx: Tx, environmentId: string, userKey: string, names: readonly string[], after: number): Promise<number | null> {
  const [row] = await tx.$queryRaw<{ at: Date | null }[]>`
    SELECT min(received_at) AS at FROM events
    WHERE environment_id = ${environmentId}::uuid AND journey_user = ${userKey} AND received_at > ${new Date(after)}
      AND event = ANY(${names.map(toPgText)}::text[])`;
  return row?.at ? row.at.getTime() : null;
}

/** What a send step needs to know: the person's profile fields and the address's marketing consent. */
export async function profileFields(tx: Tx, environmentId: string, userKey: string): Promise<Record<string, unknown> | null> {
  const rows = await tx.$queryRaw<{ fields: string }[]>`
    SELECT p.fields FROM profile_users u JOIN profiles p ON p.id = u.profile_id
    WHERE u.environment_id = ${environmentId}::uuid AND u.user_hash = ${hashStored(userKey)} AND u.user_id = ${userKey}`;
  return rows[0] ? (JSON.parse(rows[0].fields) as Record<string, unknown>) : null;
}

/** One row per run and step, whatever happens: a step is recorded once. */
export async function recordSend(tx: Tx, runId: string, journeyId: string, send: { step: number; channel: string; template: string }, verdict: SendVerdict) {
  await tx.$executeRaw`
    INSERT INTO journey_messages (run_id, journey_id, step, channel, template, address, status, reason)
    VALUES (${runId}::uuid, ${journeyId}::uuid, ${send.step}, ${send.channel}, ${send.template}, ${verdict.address === null ? null : toPgText(verdict.address)},
            ${verdict.status}, ${verdict.status === 'skipped' ? verdict.reason : null})
    ON CONFLICT (run_id, step) DO NOTHING`;
}

export interface WakingRun {
  id: string;
  environmentId: string;
  userKey: string;
  journeyId: string;
  wakeAt: number;
}

/** Active runs to evaluate by `bound`, earliest first. */
export async function wakingRuns(db: Db, bound: number, limit: number): Promise<WakingRun[]> {
  const rows = await db.$queryRaw<{ id: string; environment_id: string; user_id: string; journey_id: string; wake_at: bigint }[]>`
    SELECT id, environment_id, user_id, journey_id, wake_at FROM journey_runs
    WHERE wake_at IS NOT NULL AND wake_at <= ${BigInt(bound)}
    ORDER BY wake_at LIMIT ${limit}`;
  return rows.map((r) => ({ id: r.id, environmentId: r.environment_id, userKey: r.user_id, journeyId: r.journey_id, wakeAt: Number(r.wake_at) }));
}

export interface RunView {
  id: string;
  userId: string;
  status: RunStatus;
  step: number;
  waitingFor: string | null;
  dueAt: number | null;
  enteredAt: number;
  convertedAt: number | null;
  endedAt: number | null;
  messages: { step: number; channel: string; template: string; address: string | null; status: string; reason: string | null }[];
}

/** A journey's runs with what their send steps did, for operators. */
export async function listRuns(db: Db, journeyId: string, userId?: string): Promise<RunView[]> {
  const runs = await db.journeyRun.findMany({
    where: { journeyId, ...(userId === undefined ? {} : { userHash: userHashOf(userId) }) },
    orderBy: [{ enteredAt: 'asc' }, { id: 'asc' }],
    include: { messages: { orderBy: { step: 'asc' } } },
  });
  return runs.map((r) => ({
    id: r.id,
    userId: fromPgText(r.userId),
    status: r.status as RunStatus,
    step: r.step,
    waitingFor: r.waitingFor === null ? null : fromPgText(r.waitingFor),
    dueAt: num(r.dueAt),
    enteredAt: Number(r.enteredAt),
    convertedAt: num(r.convertedAt),
    endedAt: num(r.endedAt),
    messages: r.messages.map((m) => ({
      step: m.step,
      channel: m.channel,
      template: m.template,
      address: m.address === null ? null : fromPgText(m.address),
      status: m.status,
      reason: m.reason,
    })),
  }));
}
