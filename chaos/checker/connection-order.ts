// Property 6: answers come in request order on each connection. In a pipelined write (a valid
// request, then one the server refuses, and maybe one more behind it):
// - the first answer is the valid request's own (a 202 echoes its message_id, an Identify 200
//   its messageId; 429 and the documented 5xx count as its answer too): a refusal never
//   replaces it;
// - the refusal's answer comes next (400 for what Node's parser refuses, 417 for an unknown
//   Expect, 404 for a request line naming no method) and the server closes the connection;
// - a request behind that closing answer gets no answer and stores nothing; the refused one
//   stores nothing either; a valid one answered 202 / 200 is stored.
// Each pipelined request carries a messageId and a userId of its own, so storage is plain.
import type { PipelineOp } from '../history.ts';
import { checkedAt, errorOf, identityWindowEnd, jsonField, receiptWindow, type Violation } from './model.ts';
import { faultsOverlapping, type Context } from './context.ts';
import { storedTraces } from './refused-stored-nothing.ts';
import { messageKeyOf } from './keys.ts';

const PROPERTY = 'answersInRequestOrder';

const REFUSALS: Record<string, number[]> = {
  'te-and-cl': [400],
  'bad-chunk': [400],
  'two-cl': [400],
  garbage: [400, 404],
  expect: [417],
};

export function answersInRequestOrder(ctx: Context): Violation[] {
  const out: Violation[] = [];
  const traces = storedTraces(ctx.s);
  const events = new Set(ctx.s.events.map((r) => `${r.org}\0${r.messageId}`));
  const records = new Set(ctx.s.identifyMessages.map((r) => `${r.org}\0${r.messageKey}`));
  for (const op of ctx.all) {
    if (op.kind !== 'pipeline') continue;
    const report = (message: string, details?: string[]) =>
      out.push({
        property: PROPERTY,
        message: `${op.variant}: ${message}`,
        subject: `connection ${op.conn}`,
        opIds: [op.id],
        details: details ?? answersText(op),
      });
    // A gateway killed under the connection cuts it anywhere: only what was stored is judged then.
    const cut = faultsOverlapping(ctx, op).some((f) => f.kind === 'gateway-kill');
    const [valid, ...rest] = op.requests;
    const first = op.answers[0];
    if (!cut) {
      if (!first) report(op.error ? `no answer to the valid request (${op.error})` : 'no answer to the valid request');
      else if (!isAnswerOf(valid, first))
        report(`the first answer (${first.status} ${first.body.slice(0, 60)}) is not the valid request's: the refusal replaced its answer`);
      else {
        const refusal = op.answers[1];
        const expected = REFUSALS[op.variant] ?? [400];
        if (!refusal) report('no answer to the refused request');
        else if (!expected.includes(refusal.status)) report(`the refused request answered ${refusal.status}, not ${expected.join(' or ')}`);
        else if (!op.closedByServer) report('the server kept the connection open after refusing a request');
        if (op.answers.length > 2) report(`${op.answers.length} answers: a request behind the closing answer was answered`);
      }
    }
    const stored = (r: (typeof op.requests)[number]) =>
      r.messageId !== null && (r.api === 'track' ? events.has(`${op.org}\0${r.messageId}`) : records.has(`${op.org}\0${messageKeyOf(r.messageId)}`));
    // A Track event whose day has passed the retention by the check may be gone.
    const expired = valid.api === 'track' && checkedAt(ctx.s) >= identityWindowEnd(receiptWindow(op)[0], ctx.facts.retentionDays);
    if (first && isAnswerOf(valid, first) && (first.status === 202 || first.status === 200) && !expired && !stored(valid))
      report(`the valid ${valid.api} was answered ${first.status} but stored nowhere`);
    for (const r of rest) {
      const found = traces(op.org, r.messageId, r.userId);
      if (found.length) report(`the ${r.role} ${r.api} request stored data`, found);
    }
  }
  return out;
}

function isAnswerOf(request: PipelineOp['requests'][number], answer: PipelineOp['answers'][number]): boolean {
  if (answer.status === 429 || answer.status === 503 || (answer.status === 500 && errorOf(answer.body) === 'Internal error')) return true;
  if (request.api === 'track') return answer.status === 202 && jsonField(answer.body, 'message_id') === request.messageId;
  return answer.status === 200 && jsonField(answer.body, 'messageId') === request.messageId;
}

function answersText(op: PipelineOp): string[] {
  return [
    ...op.answers.map((a, i) => `answer ${i + 1}: ${a.status} ${a.body.slice(0, 100)}`),
    ...(op.trailing ? [`then ${op.trailing.length} bytes that are no whole answer`] : []),
    `closed by the server: ${op.closedByServer}${op.error ? `, error ${op.error}` : ''}`,
  ];
}
