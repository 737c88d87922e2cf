// After every check a stored call passes (a bad call still gets its 400): a call of a
// suppressed user ID is answered exactly as a stored one would be, and stored nowhere
// (gateway/suppressions.ts; docs/decisions.md "Suppression answers as usual").
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import type { Suppressions } from '../suppressions.ts';
import type { IngestState } from '../state.ts';

export function suppressedTrack(suppressions: Suppressions): Middleware<IngestState> {
  return async function suppressedTrack(ctx, next) {
    const { environment, track, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, track.userId, receivedAt, 'track')) return next();
    ctx.status = 202;
    ctx.body = { message_id: track.messageId, status: 'accepted' };
  };
}

export function suppressedIdentify(suppressions: Suppressions): Middleware<IngestState> {
  return async function suppressedIdentify(ctx, next) {
    const { environment, identify, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, identify.userId, receivedAt, 'identify')) return next();
    ctx.body = { success: true, messageId: identify.messageId ?? randomUUID(), duplicate: false };
  };
}
