// After every check a stored call passes (a bad call still gets its 400): a call of a
// suppressed user ID is answered exactly as a stored one would be, and stored nowhere
// (gateway/suppressions.ts; docs/decisions.md "Suppression answers as usual").
import { randomUUID } from 'node:crypto';
import type { Middleware } from 'koa';
import { answerIdentifySaved, answerTrackAccepted } from '../answers.ts';
import type { Suppressions } from '../suppressions.ts';
import type { IngestState } from '../state.ts';

export function suppressedTrack(suppressions: Suppressions): Middleware<IngestState> {
  return async function suppressedTrack(ctx, next) {
    const { environment, track, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, track.userId, receivedAt, 'track')) return next();
    answerTrackAccepted(ctx, track.messageId);
  };
}

export function suppressedIdentify(suppressions: Suppressions): Middleware<IngestState> {
  return async function suppressedIdentify(ctx, next) {
    const { environment, identify, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, identify.userId, receivedAt, 'identify')) return next();
    answerIdentifySaved(ctx, identify.messageId ?? randomUUID(), false);
  };
}
