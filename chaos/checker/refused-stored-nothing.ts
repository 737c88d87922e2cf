// Property 4: a request with bad input is answered 4xx (or a documented 5xx during a fault:
// property 5) and stores nothing. Each such request
// carries a messageId and a userId used by no other request, so any row holding either is
// its doing.
import { answered, type BadOp, type Org } from '../history.ts';
import { messageKeyOf } from './keys.ts';
import type { Context } from './context.ts';
import type { Snapshot, Violation } from './model.ts';

const PROPERTY = 'refusedStoredNothing';

export function refusedStoredNothing(ctx: Context): Violation[] {
  const out: Violation[] = [];
  const traces = storedTraces(ctx.s);
  for (const op of ctx.all) {
    if (op.kind !== 'bad' || !answered(op.outcome)) continue;
    const { status } = op.outcome;
    // A 5xx comes before the body is judged (an uncached key while PostgreSQL is away): property 5
    // judges whether it was one the contract allows then; it must have stored nothing all the same.
    if (status < 400) {
      out.push({ property: PROPERTY, message: `bad input (${op.what}) answered ${status}, not 4xx`, subject: subject(op), opIds: [op.id] });
      continue;
    }
    const found = traces(op.org, op.messageId, op.userId);
    if (found.length) out.push({ property: PROPERTY, message: `answered ${status} but stored`, subject: subject(op), opIds: [op.id], details: found });
  }
  return out;
}

const subject = (op: BadOp) => `messageId ${op.messageId ?? '(none)'} / userId ${op.userId ?? '(none)'}`;

/** What the final state holds of a messageId or a userId: events, Identify records, profile users. */
export function storedTraces(s: Snapshot): (org: Org, messageId: string | null, userId: string | null) => string[] {
  const events = new Map<string, string[]>();
  const add = (key: string, text: string) => events.set(key, [...(events.get(key) ?? []), text]);
  for (const r of s.events) {
    const text = `events: messageId ${JSON.stringify(r.messageId)}, userId ${JSON.stringify(r.userId)}`;
    add(`${r.org}\0m\0${r.messageId}`, text);
    if (r.userId !== null) add(`${r.org}\0u\0${r.userId.trim()}`, text);
  }
  for (const r of s.identifyMessages) add(`${r.org}\0k\0${r.messageKey}`, `identify_messages: key ${r.messageKey}`);
  for (const r of s.profileUsers) add(`${r.org}\0u\0${r.userId}`, `profile_users: ${JSON.stringify(r.userId)}`);
  return (org, messageId, userId) => [
    ...(messageId === null ? [] : [...(events.get(`${org}\0m\0${messageId}`) ?? []), ...(events.get(`${org}\0k\0${messageKeyOf(messageId)}`) ?? [])]),
    ...(userId === null ? [] : (events.get(`${org}\0u\0${userId.trim()}`) ?? [])),
  ];
}
