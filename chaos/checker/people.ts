// Who a person is and what may have taken a call's data away: what each erasure must have
// erased, which erasure or suppression may have, and the exemptions they give. Each user of a
// run keeps one email, so where profiles join by email a shared email is one person.
import type { IdentifyOp, Op } from '../history.ts';
import { answered } from '../history.ts';
import type { Context } from './context.ts';
import type { Erasure, Suppression } from './erasures.ts';
import { certainlyBefore, opSpan, overlaps } from './model.ts';

/**
 * Everyone an erasure that exited 0 must have taken: its user ID, the IDs its output lists,
 * and, where profiles join by email, each user ID whose Identify with one of the person's
 * emails was answered 200 before the erasure started, was not possibly suppressed then, and
 * had no other erasure of that ID in between. Each user of a run keeps one email, so a shared
 * email means a joined profile.
 */
export function certainPerson(ctx: Context, e: Erasure): Set<string> {
  const person = new Set([e.userId, ...e.joined]);
  if (!ctx.facts.joinByEmail[e.org]) return person;
  const counts = (op: IdentifyOp) =>
    op.email !== null &&
    answered(op.outcome) &&
    op.outcome.status === 200 &&
    certainlyBefore(op, e.op) &&
    // An op whose effect another erasure may have removed before this one does not count.
    !(ctx.erasuresOf.get(`${e.org}\0${op.userId.trim()}`) ?? []).some((x) => x !== e && x.op.invokedAt < e.op.invokedAt && x.op.completedAt > op.invokedAt) &&
    !suppressedDuring(ctx, op, op.userId.trim());
  const emails = new Set<string>();
  for (const u of person) for (const op of ctx.identifiesByUser.get(`${e.org}\0${u}`) ?? []) if (counts(op)) emails.add(op.email!);
  for (const email of emails) for (const op of ctx.identifiesByEmail.get(`${e.org}\0${email}`) ?? []) if (counts(op)) person.add(op.userId.trim());
  return person;
}

/** The emails of a person's Identify calls answered before the erasure started: it must have removed them. */
export function certainEmails(ctx: Context, e: Erasure, person: Set<string>): Set<string> {
  const out = new Set<string>();
  for (const u of person)
    for (const op of ctx.identifiesByUser.get(`${e.org}\0${u}`) ?? []) if (op.email !== null && certainlyBefore(op, e.op)) out.add(op.email);
  return out;
}

/**
 * An erasure of `userId`'s person that may have happened after `op` was received (it had not
 * certainly completed before `op` was sent), so `op`'s data may be gone.
 */
export function erasedAfter(ctx: Context, op: Op, userId: string): Erasure | undefined {
  return ctx.erasures.find((e) => e.org === op.org && e.op.completedAt > op.invokedAt && e.possible.has(userId));
}

/** A suppression of `userId` that may have been in force while `op` was received. */
export function suppressedDuring(ctx: Context, op: Op, userId: string): Suppression | undefined {
  return ctx.suppressionsOf.get(`${op.org}\0${userId}`)?.find((s) => overlaps([s.from, s.to], opSpan(op)));
}

/** Why `op`'s data may legitimately be missing: an erasure or a suppression of its person. */
export function exemption(ctx: Context, op: Op, userId: string | null): string | null {
  if (userId === null) return null;
  const e = erasedAfter(ctx, op, userId);
  if (e) return `erasure op#${e.op.id}`;
  const s = suppressedDuring(ctx, op, userId);
  if (s) return `suppression by op#${s.by}`;
  return null;
}
