// The contract's success answers (docs/openapi.yaml), written in one place: a call answered
// after its own work and a call of a suppressed user, answered as if stored
// (checks/suppressed.ts), must be indistinguishable to the caller.
import type { ServerResponse } from 'node:http';

// Each is written straight to Node's response, head and body at once, with the Content-Type Koa
// gives a JSON body and the request's X-Request-Id (which the request log adds to every other
// answer): Koa's own response handling (`ctx.respond = false` skips it) set each header through
// its setters, measured the body again and checked it for a media type on every request, 5 % of
// Track's thread. A messageId is well-formed (no lone surrogate), so JSON.stringify writes it as
// stringifyJson would.

/** What an answer is written into: Koa's context. */
interface Reply {
  respond?: boolean;
  res: ServerResponse;
  state: { requestId: string };
}

const JSON_TYPE = 'application/json; charset=utf-8';

function writeJson(ctx: Reply, status: number, body: string): void {
  ctx.respond = false;
  const res = ctx.res;
  // As Koa's respond(): nothing is written for a caller that has gone.
  if (res.writableEnded || (res.socket !== null && !res.socket.writable)) {
    res.statusCode = status;
    return;
  }
  res.writeHead(status, ['Content-Type', JSON_TYPE, 'Content-Length', String(Buffer.byteLength(body)), 'X-Request-Id', ctx.state.requestId]);
  res.end(body);
}

/** Track: 202 once the event is durably queued. */
export function answerTrackAccepted(ctx: Reply, messageId: string): void {
  writeJson(ctx, 202, `{"message_id":${JSON.stringify(messageId)},"status":"accepted"}`);
}

/** Identify: 200 once the call is saved, or recognized as a duplicate. */
export function answerIdentifySaved(ctx: Reply, messageId: string, duplicate: boolean): void {
  writeJson(ctx, 200, `{"success":true,"messageId":${JSON.stringify(messageId)},"duplicate":${duplicate}}`);
}

/** Profiles: 200 with the profile, whose JSON text the handler has written. */
export function answerProfile(ctx: Reply, text: string): void {
  writeJson(ctx, 200, text);
}
