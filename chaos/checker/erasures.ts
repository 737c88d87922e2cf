// The run's erasures and suppressions as the context records them (context.ts builds them from
// the history), and possiblePerson: whom an erasure may have taken, from the emails alone.
import type { CommandOp, Org } from '../history.ts';

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
