// The contract's success answers (docs/openapi.yaml), written in one place: a call answered
// after its own work and a call of a suppressed user, answered as if stored
// (checks/suppressed.ts), must be indistinguishable to the caller.

// Each is written as its JSON text, with its Content-Type set as Koa sets it for a JSON body: no
// object to serialize after the handler, and no media type to look up, on every request. A
// messageId is well-formed (no lone surrogate), so JSON.stringify writes it as stringifyJson would.

/** What an answer is written into: Koa's context. */
interface Reply {
  status: number;
  body: unknown;
  set(field: string, value: string): void;
}

const JSON_TYPE = 'application/json; charset=utf-8';

/** Track: 202 once the event is durably queued. */
export function answerTrackAccepted(ctx: Reply, messageId: string): void {
  ctx.status = 202;
  ctx.set('Content-Type', JSON_TYPE);
  ctx.body = `{"message_id":${JSON.stringify(messageId)},"status":"accepted"}`;
}

/** Identify: 200 once the call is saved, or recognized as a duplicate. */
export function answerIdentifySaved(ctx: Reply, messageId: string, duplicate: boolean): void {
  ctx.status = 200;
  ctx.set('Content-Type', JSON_TYPE);
  ctx.body = `{"success":true,"messageId":${JSON.stringify(messageId)},"duplicate":${duplicate}}`;
}
