// Who a person is and what may have taken a call's data away: the erasures (what each may
// have erased and what it must have), the suppressions, and the exemptions they give. Each
// user of a run keeps one email, so where profiles join by email a shared email is one person.
import type { CommandOp, IdentifyOp, Op, Org } from '../history.ts';
import { answered } from '../history.ts';
import type { Context } from './context.ts';
import { certainlyBefore, opSpan, overlaps } from './model.ts';

/** An erasure command, with what its output says it erased. */
export interface Erasure {
  op: CommandOp;
  org: Org;
  userId: string;
  /** The other user IDs of the joined profile, from the JSON output of an erasure that exited 0. */
  joined: string[];
  succeeded: boolean;
  /** Everyone it may have taken (possiblePerson). */
  possible: Set<string>;
}

/** A span in which `userId` may have been suppressed. */
export interface Suppression {
  org: Org;
  userId: string;
  from: number;
  /** When an unsuppress certainly took effect (Infinity: never). */
  to: number;
  by: number;
}

/**
 * Everyone an erasure may have taken: its user ID, the IDs its output lists, and, where
 * profiles join by email (`emails` given), every user ID that ever shared an email with one of
 * those (a joined profile is erased whole). An upper bound: what the erasure may have removed.
 */
export function possiblePerson(emails: Map<string, Set<string>> | null, ids: string[]): Set<string> {
  const person = new Set(ids);
  if (!emails) return person;
  const usersByEmail = new Map<string, Set<string>>();
  for (const [u, es] of emails) for (const em of es) usersByEmail.set(em, (usersByEmail.get(em) ?? new Set()).add(u));
  for (let grew = true; grew;) {
    grew = false;
    for (const u of [...person])
      for (const em of emails.get(u) ?? [])
        for (const other of usersByEmail.get(em) ?? [])
          if (!person.has(other)) {
            person.add(other);
            grew = true;
          }
  }
  return person;
}

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
