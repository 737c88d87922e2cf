// Property 5: no 5xx outside the documented cases, and every answer one the contract gives.
//
// The documented 5xx are Track's 503 `Event storage is unavailable` and 500 `Internal error`
// (Identify and Profiles: 500 only), and only while a fault is active or within
// RECOVERY_WINDOW_MS after it healed. A valid request gets its success status, 429 (overload),
// 404 for a profile not there, or 409 when another body with its messageId may have been
// recorded before it (a conflicting reuse; or the original erased, a reuse stored as new data,
// then the original retried); a 202 echoes its messageId and a 200 of Identify says
// `duplicate` true or false.
import { answered, neverSent, type Op, type Outcome } from '../history.ts';
import { errorOf, jsonField, type Violation } from './model.ts';
import { faultsOverlapping, type Context } from './context.ts';

const PROPERTY = 'serverErrorsOnlyInFaults';

/**
 * How long after a fault healed its 5xx may still come: a gateway's PostgreSQL pool finds its
 * connections broken only when it uses them (each then fails once), the Redis Cluster client
 * refreshes its slot map after a failover within seconds, BullMQ's connections reconnect with
 * backoff, and the key cache probes PostgreSQL once a second. 15 s covers those on a busy
 * 2-core machine; a 5xx later than that is the service failing, not recovering.
 */
export const RECOVERY_WINDOW_MS = 15_000;

const DOCUMENTED: Record<string, Set<string>> = {
  track: new Set(['503 Event storage is unavailable', '500 Internal error']),
  identify: new Set(['500 Internal error']),
  profile: new Set(['500 Internal error']),
};

export function serverErrorsOnlyInFaults(ctx: Context): Violation[] {
  const out: Violation[] = [];
  const report = (op: Op, message: string) => out.push({ property: PROPERTY, message, subject: `op#${op.id} (${op.kind})`, opIds: [op.id] });
  for (const op of ctx.all) {
    const answers: { api: string; outcome: Outcome }[] = [];
    if (op.kind === 'track' || op.kind === 'identify' || op.kind === 'profile') answers.push({ api: op.kind, outcome: op.outcome });
    if (op.kind === 'bad') answers.push({ api: op.api, outcome: op.outcome });
    if (op.kind === 'pipeline')
      for (const [i, a] of op.answers.entries()) answers.push({ api: op.requests[i]?.api ?? 'track', outcome: { status: a.status, body: a.body } });
    for (const { api, outcome } of answers) {
      if (!answered(outcome) || outcome.status < 500) continue;
      const what = `${outcome.status} ${errorOf(outcome.body) ?? outcome.body.slice(0, 80)}`;
      if (!DOCUMENTED[api]?.has(what)) report(op, `an undocumented ${api} answer: ${what}`);
      else if (!faultsOverlapping(ctx, op, RECOVERY_WINDOW_MS).length)
        report(op, `${what} with no fault active or healed within ${RECOVERY_WINDOW_MS / 1000} s`);
    }
    const contract = contractProblem(op, () => mayHoldOtherBody(ctx, op));
    if (contract) report(op, contract);
  }
  return out;
}

/** Whether an Identify with `op`'s messageId and another body may have been recorded before `op` completed. */
function mayHoldOtherBody(ctx: Context, op: Op): boolean {
  if (op.kind !== 'identify') return false;
  return (ctx.identifiesByMessage.get(`${op.org}\0${op.messageId}`) ?? []).some(
    (x) =>
      x.body !== op.body &&
      x.invokedAt < op.completedAt &&
      !neverSent(x.outcome) &&
      (!answered(x.outcome) || x.outcome.status === 200 || x.outcome.status >= 500),
  );
}

/** What is wrong with a valid request's answer, or null. */
function contractProblem(op: Op, otherBodyRecorded: () => boolean): string | null {
  if (op.kind !== 'track' && op.kind !== 'identify' && op.kind !== 'profile') return null;
  if (!answered(op.outcome) || op.outcome.status >= 500 || op.outcome.status === 429) return null;
  const { status, body } = op.outcome;
  if (op.kind === 'track') {
    if (status !== 202) return `a valid Track answered ${status}: ${body.slice(0, 120)}`;
    if (jsonField(body, 'message_id') !== op.messageId || jsonField(body, 'status') !== 'accepted')
      return `a 202 that does not echo its messageId: ${body.slice(0, 120)}`;
  }
  if (op.kind === 'identify') {
    if (status === 409 && otherBodyRecorded()) return null;
    if (status !== 200) return `a valid Identify answered ${status}: ${body.slice(0, 120)}`;
    if (jsonField(body, 'messageId') !== op.messageId || typeof jsonField(body, 'duplicate') !== 'boolean')
      return `a 200 that does not echo its messageId: ${body.slice(0, 120)}`;
  }
  if (op.kind === 'profile' && status !== 200 && !(status === 404 && errorOf(body) === 'Profile not found'))
    return `a Profiles read answered ${status}: ${body.slice(0, 120)}`;
  return null;
}
