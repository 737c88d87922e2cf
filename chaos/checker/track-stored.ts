// Property 1: every Track answered 202 is stored exactly once.
//
// For one environment and messageId, the rows of `events` must be:
// - each explained by a request: a send of that messageId, with that userId as sent, that the
//   gateway may have received at the row's receipt time (a row no request explains is invented);
// - never two within one identity window (a resend inside the retention is the same event),
//   unless an erasure of the person came between them (then the later one is new data);
// - enough for every 202: a send answered 202 is satisfied by a row of its own or of an
//   earlier send of the same messageId whose identity window it fell in (it was a duplicate),
//   or of a resend of the same body inside its own window (stored first, this one its duplicate).
//   It needs none when its person was erased by an erasure that may have come after its
//   receipt, or was possibly suppressed when it arrived, or when it may have repeated an
//   earlier send of another person whose copy was removed so, or when its receipt day has passed
//   the retention by the time the state was read (its partition may be dropped), or when the
//   copy it duplicated has since passed the retention.
// And every messageId record (event_ids) has its event, unless its day has passed the
// retention: a record left without its event (an erased one, say) makes a later send of that
// messageId a duplicate of nothing, stored nowhere.
import { answered, neverSent, type TrackOp } from '../history.ts';
import { messageHashOf } from './keys.ts';
import { checkedAt, groupBy, identityWindowEnd, isTrack, RETENTION_SETTLE_MS, receiptWindow, trimmed, within, type Violation } from './model.ts';
import { type Context } from './context.ts';
import { exemption } from './people.ts';

const PROPERTY = 'trackStoredExactlyOnce';

type Row = Context['s']['events'][number];

export function trackStoredExactlyOnce(ctx: Context): Violation[] {
  const { s, facts } = ctx;
  const days = facts.retentionDays;
  const rowsOf = groupBy(s.events, (r) => `${r.org}\0${r.messageId}`);
  const sendsOf = groupBy(
    ctx.all.filter((op): op is TrackOp => isTrack(op) && !neverSent(op.outcome)),
    (op) => `${op.org}\0${op.messageId}`,
  );
  const out: Violation[] = [];
  for (const [key, sends] of sendsOf) {
    sends.sort((a, b) => a.invokedAt - b.invokedAt);
    const rows = (rowsOf.get(key) ?? []).sort((a, b) => a.receivedAt - b.receivedAt);
    const messageId = sends[0].messageId;
    const explainers = (row: Row) => sends.filter((op) => op.userId === row.userId && within(row.receivedAt, receiptWindow(op)));

    for (const row of rows) {
      if (!explainers(row).length)
        out.push({
          property: PROPERTY,
          message: 'a stored event that no request of its messageId and userId could have delivered at its receipt time',
          subject: `messageId ${messageId}`,
          opIds: sends.map((op) => op.id),
          details: [rowText(row)],
        });
    }

    for (let i = 1; i < rows.length; i++) {
      const [first, second] = [rows[i - 1], rows[i]];
      if (second.receivedAt >= identityWindowEnd(first.receivedAt, days)) continue;
      const user = trimmed(second.userId);
      // An erasure between them took the first copy's identity: the second is new data (the first one's survival is property 3's).
      const erasedBetween =
        user !== null &&
        ctx.erasures.some(
          (e) =>
            e.org === sends[0].org &&
            e.possible.has(user) &&
            e.op.completedAt + e.op.offsetMs > first.receivedAt &&
            e.op.invokedAt + e.op.offsetMs < second.receivedAt,
        );
      if (erasedBetween) continue;
      out.push({
        property: PROPERTY,
        message: 'stored twice within one identity window (the retention)',
        subject: `messageId ${messageId}`,
        opIds: sends.map((op) => op.id),
        details: [rowText(first), rowText(second)],
      });
    }

    const checked = checkedAt(s);
    for (const send of sends) {
      if (!answered(send.outcome) || send.outcome.status !== 202) continue;
      if (exemption(ctx, send, trimmed(send.userId))) continue;
      const [earliest] = receiptWindow(send);
      // Its own day may have passed the retention by the time the state was read.
      if (checked >= identityWindowEnd(earliest, days)) continue;
      const earlier = sends.filter((op) => op.invokedAt <= send.completedAt);
      // A copy of the same body sent again inside this send's identity window is the same event,
      // whichever copy a worker reaches first: batches go to partitions in turn, and a partition
      // whose master failed over is drained only once the workers have found its new master.
      const copies = sends.filter((op) => sameBody(op, send));
      const satisfied = rows.some(
        (row) =>
          earliest < identityWindowEnd(row.receivedAt, days) + RETENTION_SETTLE_MS &&
          explainers(row).some((op) => earlier.includes(op) || (copies.includes(op) && row.receivedAt < identityWindowEnd(receiptWindow(send)[1], days))),
      );
      if (satisfied) continue;
      // It may have been a repeat of an earlier send of another person (the same messageId is one
      // event, the first stored), whose copy that person's erasure or suppression then removed.
      const dupOfRemoved = earlier.some((op) => op !== send && trimmed(op.userId) !== trimmed(send.userId) && exemption(ctx, op, trimmed(op.userId)));
      if (dupOfRemoved) continue;
      // The copy it duplicated may have passed the retention since.
      const dupOfExpired = earlier.some(
        (op) =>
          op !== send &&
          earliest < identityWindowEnd(receiptWindow(op)[1], days) + RETENTION_SETTLE_MS &&
          checked >= identityWindowEnd(receiptWindow(op)[0], days),
      );
      if (dupOfExpired) continue;
      const afterWindow = earlier.some((op) => op !== send && earliest >= identityWindowEnd(receiptWindow(op)[1], days));
      const user = trimmed(send.userId);
      const afterErasure =
        user !== null &&
        ctx.erasures.some(
          (e) =>
            e.org === send.org &&
            e.possible.has(user) &&
            e.op.completedAt < send.invokedAt &&
            earlier.some((op) => op !== send && op.invokedAt < e.op.completedAt),
        );
      out.push({
        property: PROPERTY,
        message: afterWindow
          ? 'answered 202 but stored nowhere: a resend after the retention window (the product stores it as a new event)'
          : afterErasure
            ? 'answered 202 but stored nowhere: a resend after its person was erased (new data, whatever its messageId)'
            : 'answered 202 but stored nowhere',
        subject: `messageId ${messageId}`,
        opIds: sends.map((op) => op.id),
        details: rows.length ? rows.map(rowText) : ['no row of this messageId in events'],
      });
    }
  }
  out.push(...identitiesWithoutEvents(ctx));
  return out;
}

function identitiesWithoutEvents(ctx: Context): Violation[] {
  const out: Violation[] = [];
  const checked = checkedAt(ctx.s);
  const byHash = new Map<string, TrackOp[]>();
  for (const [key, sends] of ctx.tracksByMessage) byHash.set(`${key.split('\0')[0]}\0${messageHashOf(sends[0].messageId)}`, sends);
  for (const orphan of ctx.s.orphanMessageIds) {
    if (checked >= identityWindowEnd(orphan.receivedAt, ctx.facts.retentionDays)) continue;
    const sends = byHash.get(`${orphan.org}\0${orphan.messageHash}`) ?? [];
    out.push({
      property: PROPERTY,
      message: 'a messageId record (event_ids) without its event, inside the retention: a later send of it would be stored nowhere',
      subject: sends.length ? `messageId ${sends[0].messageId}` : `message hash ${orphan.messageHash}`,
      opIds: sends.map((op) => op.id),
      details: [`event_ids: org ${orphan.org}, received_at ${new Date(orphan.receivedAt).toISOString()}, no events row`],
    });
  }
  return out;
}

/** One body sent twice: a resend carries the original's id. */
function sameBody(a: TrackOp, b: TrackOp): boolean {
  return (a.resendOf ?? a.id) === (b.resendOf ?? b.id);
}

function rowText(row: Row): string {
  return `events row: org ${row.org}, messageId ${JSON.stringify(row.messageId)}, userId ${JSON.stringify(row.userId)}, received_at ${new Date(row.receivedAt).toISOString()}`;
}
