// Property 3: every erasure that exited 0 left nothing of the person received before it.
//
// The person: the user ID (trimmed), every ID its JSON output lists as joined, and (where
// profiles join by email) every ID that joined through the person's email before it started.
// For each of them, whatever the final state holds must be explained by a call that was not
// certainly before the erasure (completed before it was invoked): profile_users rows, events
// whose userId trims to the ID (any spelling), Identify records (by the user's key), journey
// runs, profiles and address claims with the person's email, and any Redis key or value holding
// the raw ID. Nothing of anyone else may be lost: properties 1 and 2 cover the others.
//
// An erasure that exits non-zero is a violation unless a PostgreSQL fault overlapped it, and
// even then its error must not be a constraint violation. One with no fault overlapping it
// must exit within ERASURE_BOUND_MS more than the control command started beside it (racing
// joins or not); one whose control did not exit 0 within ERASURE_EXIT_BOUND_MS.
import type { CommandOp, Op } from '../history.ts';
import { neverSent } from '../history.ts';
import { userKeyOf } from './keys.ts';
import { POSTGRES_FAULTS, receiptWindow, trimmed, within, type Violation } from './model.ts';
import { faultsOverlapping, type Context } from './context.ts';
import type { Erasure } from './erasures.ts';
import { certainEmails, certainPerson } from './people.ts';

const PROPERTY = 'erasureRemovedPerson';

/**
 * An erasure, even one racing ~200 joins a second, finishes within 2 s. The run measures the
 * command's wall time less that of a control command started with it (a `users forget` of
 * nobody in another environment: the same start-up, connections and queue scans, nothing to
 * wait for or remove), so what a busy machine adds to any command (its start-up alone took
 * 5.5 s on a loaded 2-core VM) is not charged to the erasure.
 */
export const ERASURE_BOUND_MS = 2_000;

/** An erasure whose control command failed: the same 2 s, plus a start-up of a few seconds. */
export const ERASURE_EXIT_BOUND_MS = 6_000;

/** A PostgreSQL refusal for the data's sake, in any language: a constraint's name or SQLSTATE class 23. */
export function looksLikeConstraintViolation(stderr: string): boolean {
  return /_fkey\b|_pkey\b|_key\b|_check\b|\b23\d{3}\b|constraint|Constraint|verletzt/.test(stderr);
}

export function erasureRemovedPerson(ctx: Context): Violation[] {
  const out: Violation[] = [];
  for (const e of ctx.erasures) {
    const op = e.op;
    const faults = faultsOverlapping(ctx, op);
    const pgFaults = faults.filter((f) => POSTGRES_FAULTS.has(f.kind));
    if (op.exitCode !== 0) {
      if (!pgFaults.length) out.push(violation(e, `the erasure exited ${op.exitCode} with no PostgreSQL fault during it: ${op.stderr.trim()}`));
      else if (looksLikeConstraintViolation(op.stderr)) out.push(violation(e, `the erasure failed on a constraint: ${op.stderr.trim()}`));
      continue;
    }
    // A control command is the yardstick of the erasure beside it, not an erasure to time.
    if (!faults.length && op.purpose !== 'control') {
      const wall = op.completedAt - op.invokedAt;
      const control = ctx.all.find((o): o is CommandOp => o.id === op.pairedWith && 'purpose' in o && o.purpose === 'control');
      if (control && control.exitCode === 0) {
        const own = wall - (control.completedAt - control.invokedAt);
        if (own > ERASURE_BOUND_MS)
          out.push(violation(e, `the erasure took ${own} ms more than its control command (bound ${ERASURE_BOUND_MS} ms; wall ${wall} ms)`, [control.id]));
      } else if (wall > ERASURE_EXIT_BOUND_MS) out.push(violation(e, `the erasure took ${wall} ms (bound ${ERASURE_EXIT_BOUND_MS} ms)`));
    }
    out.push(...remainders(ctx, e));
  }
  return out;
}

function violation(e: Erasure, message: string, more: number[] = [], details?: string[]): Violation {
  return { property: PROPERTY, message, subject: `person ${e.userId} (org ${e.org})`, opIds: [e.op.id, ...more], details };
}

/** What the final state still holds of the person, unexplained by calls not certainly before the erasure. */
function remainders(ctx: Context, e: Erasure): Violation[] {
  const person = certainPerson(ctx, e);
  const emails = certainEmails(ctx, e, person);
  const key = (k: string) => `${e.org}\0${k}`;
  const notBefore = (op: Op) => op.org === e.org && !('outcome' in op && neverSent(op.outcome)) && op.completedAt > e.op.invokedAt;
  const calledLater = (u: string) => (ctx.latest.byUser.get(key(u)) ?? -Infinity) > e.op.invokedAt;
  const emailLater = (email: string) => (ctx.latest.byEmail.get(key(email)) ?? -Infinity) > e.op.invokedAt;
  const found: string[] = [];
  const culprits = new Set<number>();

  for (const u of person) {
    if (!calledLater(u))
      for (const r of ctx.rows.profileUsers.get(key(u)) ?? []) found.push(`profile_users: ${JSON.stringify(r.userId)} → profile ${r.profileId}`);

    for (const r of ctx.rows.events.get(key(u)) ?? []) {
      const senders = (ctx.tracksByMessage.get(key(r.messageId)) ?? []).filter((op) => op.userId === r.userId && within(r.receivedAt, receiptWindow(op)));
      if (senders.some(notBefore)) continue;
      senders.forEach((op) => culprits.add(op.id));
      found.push(`events: messageId ${JSON.stringify(r.messageId)}, userId ${JSON.stringify(r.userId)}, received_at ${new Date(r.receivedAt).toISOString()}`);
    }

    for (const r of ctx.rows.identifyMessages.get(key(userKeyOf(u))) ?? []) {
      const callers = (ctx.identifiesByKey.get(key(r.messageKey)) ?? []).filter((op) => op.userId.trim() === u);
      if (callers.some(notBefore)) continue;
      callers.forEach((op) => culprits.add(op.id));
      found.push(
        `identify_messages: key ${r.messageKey} of ${JSON.stringify(u)} (${callers.length ? `messageId ${callers[0].messageId}` : 'no call of the person has this key'})`,
      );
    }

    for (const r of ctx.rows.journeyRuns.get(key(u)) ?? []) {
      const messageId = r.triggerKey.startsWith('e:') ? r.triggerKey.slice(2) : null;
      const triggers = (ctx.tracksByMessage.get(key(messageId ?? '')) ?? []).filter((op) => trimmed(op.userId) === r.userId);
      if (triggers.some(notBefore)) continue;
      found.push(`journey_runs: ${JSON.stringify(r.userId)}, trigger ${r.triggerKey}`);
    }

    // A key of the other org's environment holds that org's user IDs: the same ID there is someone else.
    for (const { key: redisKey, org, tokens } of ctx.redisTokens)
      if ((!org || org === e.org) && tokens.has(u) && !calledLater(u)) found.push(`Redis key ${redisKey} holds ${JSON.stringify(u)}`);
  }

  for (const email of emails) {
    if (emailLater(email)) continue;
    for (const p of ctx.rows.profiles.get(key(email)) ?? []) found.push(`profiles: ${p.id} with email ${p.email}`);
    for (const c of ctx.rows.addressClaims.get(key(email)) ?? []) found.push(`address_claims: ${c.value}`);
  }

  if (!found.length) return [];
  return [
    violation(
      e,
      `the erasure exited 0 but left data of the person received before it (${person.size} user IDs)`,
      [...culprits].slice(0, 20),
      found.slice(0, 30),
    ),
  ];
}
