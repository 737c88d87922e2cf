// Identify's group commit: the calls of one batch in ONE transaction, through the node-postgres
// pool, in the order the data flows: read and lock (identify-write.ts), plan every answer and
// row in memory (identify-plan.ts; on a JSON pool thread when large, json-pool.ts), write and
// COMMIT. A batch whose profiles this gateway cached takes one round trip, any other (or a stale
// one) the locked path. A deadlock (or a profile joined away meanwhile) runs the batch again; a
// batch PostgreSQL refuses for its data is split until the refused call is alone (splitOnRefusal).
import type pg from 'pg';
import { isDataError, isWriteConflict, poolOf, retrying, splitOnRefusal, sqlState, type Db } from '../platform/db.ts';
import { addressHistoryFrom } from './consent.ts';
import { inlineJsonWork, type JsonWork } from '../platform/json-pool.ts';
import { fitsCachedWrite, lockDecisions, readSnapshot, writeAndCommit, writeCached } from './identify-write.ts';
import type { OutboxNotify } from './outbox.ts';
import { CallsDropped, type DroppedCall } from './dropped-calls.ts';
import type { ProfileCache } from './profile-cache.ts';
import { planIdentifyBatch, SnapshotChanged, toIdentifyCall, type IdentifyCall, type Plan, type Snapshot, type Verdict } from './identify-plan.ts';
import type { IdentifyInput } from './validation.ts';

export type BatchOutcome = Verdict | Error;

export interface BatchOptions {
  /** Where a large batch's rules run (json-pool.ts); inline by default. */
  json?: JsonWork;
  /** Tries of a batch that met a deadlock or a changed snapshot. */
  attempts?: number;
  /** Called after a commit that wrote outbox rows (outbox.ts). */
  notify?: OutboxNotify;
  /** The profiles this gateway wrote last: a batch of them takes the one-round-trip path (identify-write.ts writeCached). */
  cache?: ProfileCache;
  /** Called with each committed batch's calls and plan (the dashboard's live view: gateway/live/recorder.ts); must not throw. */
  onCommitted?: (calls: IdentifyCall[], plan: Plan) => void;
  /** Called with the calls an erasure or a suppression dropped (answered as applied, stored nowhere); must not throw. */
  onDropped?: (dropped: DroppedCall[]) => void;
  /** ADDRESS_HISTORY_DAYS: a decision dated before it reads no address from the history (null: forever). */
  addressHistoryDays?: number | null;
}

/** Apply a batch; one outcome per call, in order. Never rejects. */
export async function applyIdentifyBatch(pool: pg.Pool, calls: IdentifyCall[], options: BatchOptions = {}): Promise<BatchOutcome[]> {
  return splitOnRefusal(calls, (part) => applyOnce(pool, part, options), refusedForItsData).catch((err: Error) => calls.map(() => err));
}

/**
 * The batch in one transaction, tried again after a deadlock or a changed snapshot. What it
 * carried that PostgreSQL or the rules refused is thrown (the caller splits the batch); any
 * other failure is every call's outcome.
 */
async function applyOnce(pool: pg.Pool, calls: IdentifyCall[], options: BatchOptions): Promise<BatchOutcome[]> {
  try {
    return await retrying(
      () => runBatch(pool, calls, options),
      options.attempts ?? 5,
      (err) => isWriteConflict(err) || err instanceof SnapshotChanged,
    );
  } catch (err) {
    if (err instanceof CallsDropped) return applyWithout(pool, calls, err.dropped, options);
    if (refusedForItsData(err)) throw err;
    return calls.map(() => err as Error);
  }
}

/**
 * A batch some of whose calls a tombstone or a suppression drops (privacy/rules.ts): those are
 * answered as applied and stored nowhere; the rest run again as a batch of their own (the
 * transaction that saw the drops was rolled back, its messageId claims with it).
 */
async function applyWithout(pool: pg.Pool, calls: IdentifyCall[], dropped: DroppedCall[], options: BatchOptions): Promise<BatchOutcome[]> {
  options.onDropped?.(dropped);
  const gone = new Set(dropped.map((d) => d.call));
  const rest = calls.filter((c) => !gone.has(c));
  const outcomes = rest.length ? await applyIdentifyBatch(pool, rest, options) : [];
  let k = 0;
  return calls.map((c) => (gone.has(c) ? 'applied' : outcomes[k++]));
}

/**
 * PostgreSQL refused what a statement carried (db.ts), or the rules threw on a value: splitting
 * the batch isolates its call. Connection faults are not split: every part would wait for its
 * own connection timeout.
 */
function refusedForItsData(err: unknown): boolean {
  return isDataError(err) || err instanceof TypeError || err instanceof RangeError || err instanceof SyntaxError;
}

async function runBatch(
  pool: pg.Pool,
  calls: IdentifyCall[],
  { json = inlineJsonWork, notify, cache, onCommitted, addressHistoryDays = null }: BatchOptions,
): Promise<Verdict[]> {
  const client = await pool.connect();
  // A connection lost between statements is heard by the pool's listener (db.ts
  // onConnectionLost); the next statement fails and the ended client leaves the pool.
  let broken: Error | undefined;
  try {
    const now = Date.now();
    const historyFrom = addressHistoryFrom(now, addressHistoryDays);
    const cached = cache?.snapshotFor(calls);
    if (cached) {
      const plan = await planOf(json, calls, cached.snapshot, now, historyFrom);
      if (fitsCachedWrite(plan)) {
        const version = await writeCached(client, calls, cached, plan).catch((err: unknown) => {
          // Stale, a messageId claimed before (23505), or refused for its data: the locked path below
          // reads what is stored (and isolates a bad call).
          if (sqlState(err) !== null) return null;
          throw err;
        });
        cache?.tried(version !== null);
        if (version !== null) return committed(plan, version);
      }
    }
    const snap = await readSnapshot(client, calls);
    let plan = await planOf(json, calls, snap, now, historyFrom);
    if (plan.consentKeys.size) {
      snap.decisions = await lockDecisions(client, plan);
      plan = await planOf(json, calls, snap, now, historyFrom);
    }
    return committed(plan, await writeAndCommit(client, plan));
  } catch (err) {
    // After a timeout or a lost connection a ROLLBACK would wait as long again: the connection
    // is dropped instead (PostgreSQL rolls back what it held).
    if (sqlState(err) !== null || err instanceof SnapshotChanged || err instanceof CallsDropped)
      await client.query('ROLLBACK').catch((e: Error) => (broken = e));
    else broken = err as Error;
    throw err;
  } finally {
    client.release(broken);
  }

  function committed(plan: Plan, version: string): Verdict[] {
    cache?.remember(plan, version);
    if (plan.outbox.length) notify?.();
    onCommitted?.(calls, plan);
    return plan.verdicts;
  }
}

/** The batch's plan, computed where its size allows (json-pool.ts); what the rules threw is thrown again here. */
async function planOf(json: JsonWork, calls: IdentifyCall[], snap: Snapshot, now: number, historyFrom: number | null): Promise<Plan> {
  const texts = calls.map((c) => c.input.traitsText);
  for (const p of snap.profiles.values()) texts.push(p.fields, p.times);
  const outcome = await json.runFor(texts, planIdentifyBatch, calls, snap, now, historyFrom);
  if (outcome.kind === 'plan') return outcome.plan;
  const rebuilt = { SnapshotChanged, TypeError, RangeError, SyntaxError }[outcome.name];
  throw rebuilt ? new rebuilt(outcome.message) : new Error(outcome.message);
}

export interface IdentifyEnvironment {
  id: string;
  features: readonly string[];
}

export type IdentifyResult = { kind: Verdict; messageId: string };

/** One call applied on its own (the gateway batches its calls: gateway/handlers/identify.ts). */
export async function applyIdentify(db: Db, env: IdentifyEnvironment, input: IdentifyInput, receivedAt: number): Promise<IdentifyResult> {
  const call = toIdentifyCall(env, input, receivedAt);
  const [outcome] = await applyIdentifyBatch(poolOf(db), [call]);
  if (outcome instanceof Error) throw outcome;
  return { kind: outcome, messageId: call.messageId };
}
