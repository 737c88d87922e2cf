// Property 7: `users export` of a person lists every stored event whose userId trims to one of
// the person's user IDs (the ID asked for, trimmed, and the `userIds` the export lists), and no
// other. Compared for the exports taken at the end, against the final state read just before
// them with nothing running. Any export exits 0 unless a PostgreSQL fault overlapped it.
import type { CommandOp } from '../history.ts';
import { POSTGRES_FAULTS, trimmed, type Violation } from './model.ts';
import { faultsOverlapping, type Context } from './context.ts';

const PROPERTY = 'exportListsEveryEvent';

interface ExportDocument {
  userIds: string[];
  events: { receivedAt: number; event: { messageId: string; userId?: string | null } }[];
}

export function exportListsEveryEvent(ctx: Context): Violation[] {
  const out: Violation[] = [];
  for (const op of ctx.all) {
    if (op.kind !== 'export' || op.purpose === 'control') continue;
    const report = (message: string, details?: string[]) =>
      out.push({ property: PROPERTY, message, subject: `person ${op.userId.trim()} (org ${op.org})`, opIds: [op.id], details });
    if (op.exitCode !== 0) {
      if (!faultsOverlapping(ctx, op, 0, POSTGRES_FAULTS).length)
        report(`the export exited ${op.exitCode} with no PostgreSQL fault during it: ${op.stderr.trim()}`);
      continue;
    }
    const doc = parse(op);
    if (!doc) {
      report(`the export's output is not one JSON document: ${op.stdout.slice(0, 120)}`);
      continue;
    }
    if (op.purpose !== 'final-export') continue;
    const ids = new Set([op.userId.trim(), ...doc.userIds.map((u) => u.trim())]);
    const key = (messageId: string, receivedAt: number) => `${messageId}\0${receivedAt}`;
    const stored = new Map(
      ctx.s.events.filter((r) => r.org === op.org && ids.has(trimmed(r.userId) ?? '')).map((r) => [key(r.messageId, r.receivedAt), r] as const),
    );
    const listed = new Map(doc.events.map((e) => [key(e.event.messageId, e.receivedAt), e] as const));
    const missing = [...stored]
      .filter(([k]) => !listed.has(k))
      .map(([, r]) => `stored, not listed: messageId ${r.messageId}, userId ${JSON.stringify(r.userId)}`);
    const extra = [...listed]
      .filter(([k]) => !stored.has(k))
      .map(([, e]) => `listed, not stored: messageId ${e.event.messageId}, userId ${JSON.stringify(e.event.userId)}`);
    if (missing.length || extra.length)
      report(
        `the export lists ${listed.size} events, the database holds ${stored.size} of the person's user IDs ${[...ids].map((u) => JSON.stringify(u)).join(', ')}`,
        [...missing.slice(0, 15), ...extra.slice(0, 15)],
      );
  }
  return out;
}

function parse(op: CommandOp): ExportDocument | null {
  try {
    const doc = JSON.parse(op.stdout) as ExportDocument;
    return Array.isArray(doc.userIds) && Array.isArray(doc.events) ? doc : null;
  } catch {
    return null;
  }
}
