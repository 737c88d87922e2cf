// Property 2: every Identify answered 200 with duplicate false is applied: its user ID (trimmed)
// reads back a profile and its messageId is recorded, unless its person was erased by an
// erasure that may have come after it or was possibly suppressed when it arrived. And where
// profiles do not join by email, no two user IDs share a profile.
import { answered, type IdentifyOp } from '../history.ts';
import { messageKeyOf } from './keys.ts';
import { groupBy, isIdentify, jsonField, type Violation } from './model.ts';
import { type Context } from './context.ts';
import { exemption } from './people.ts';

const PROPERTY = 'identifyApplied';

export function identifyApplied(ctx: Context): Violation[] {
  const { s, facts } = ctx;
  const users = new Set(s.profileUsers.map((r) => `${r.org}\0${r.userId}`));
  const keys = new Set(s.identifyMessages.map((r) => `${r.org}\0${r.messageKey}`));
  const out: Violation[] = [];
  for (const op of ctx.all) {
    if (!isIdentify(op) || !answered(op.outcome) || op.outcome.status !== 200) continue;
    if (jsonField(op.outcome.body, 'duplicate') !== false) continue;
    const userId = op.userId.trim();
    if (exemption(ctx, op, userId)) continue;
    const missing: string[] = [];
    if (!users.has(`${op.org}\0${userId}`)) missing.push(`no profile_users row for ${JSON.stringify(userId)} (org ${op.org})`);
    if (!keys.has(`${op.org}\0${messageKeyOf(op.messageId)}`)) missing.push(`no identify_messages row for messageId ${JSON.stringify(op.messageId)}`);
    if (missing.length)
      out.push({
        property: PROPERTY,
        message: 'answered 200 (duplicate: false) but not applied',
        subject: `person ${userId} (org ${op.org})`,
        opIds: related(ctx, op),
        details: missing,
      });
  }
  for (const org of ['a', 'b'] as const) {
    if (facts.joinByEmail[org]) continue;
    for (const [profileId, rows] of groupBy(
      s.profileUsers.filter((r) => r.org === org),
      (r) => r.profileId,
    )) {
      if (rows.length < 2) continue;
      out.push({
        property: PROPERTY,
        message: 'user IDs joined into one profile in an organization without join-by-email',
        subject: `profile ${profileId} (org ${org})`,
        opIds: [],
        details: rows.map((r) => `profile_users: ${JSON.stringify(r.userId)} → ${r.profileId}`),
      });
    }
  }
  return out;
}

/** The op and every other call with its messageId (the minimal history adds the operator commands about the person). */
function related(ctx: Context, op: IdentifyOp): number[] {
  return (ctx.identifiesByMessage.get(`${op.org}\0${op.messageId}`) ?? [op]).map((o) => o.id);
}
