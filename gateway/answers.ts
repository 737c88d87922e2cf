// The contract's success answers (docs/openapi.yaml), written in one place: a call answered
// after its own work and a call of a suppressed user, answered as if stored
// (middleware/suppressed.ts), must be indistinguishable to the caller.

/** What an answer is written into: Koa's context. */
interface Reply {
  status: number;
  body: unknown;
}

/** Track: 202 once the event is durably queued. */
export function answerTrackAccepted(ctx: Reply, messageId: string): void {
  ctx.status = 202;
  ctx.body = { message_id: messageId, status: 'accepted' };
}

/** Identify: 200 (Koa's status for a body) once the call is saved, or recognized as a duplicate. */
export function answerIdentifySaved(ctx: Reply, messageId: string, duplicate: boolean): void {
  ctx.body = { success: true, messageId, duplicate };
}
