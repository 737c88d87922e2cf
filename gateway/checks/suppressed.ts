// After every check a stored call passes (a bad call still gets its 400): a call of a
// suppressed user ID is answered exactly as a stored one would be, and stored nowhere
// (gateway/suppressions.ts; docs/decisions.md "Suppression answers as usual").
import { randomUUID } from 'node:crypto';
import { answerIdentifySaved, answerTrackAccepted } from '../answers.ts';
import type { Suppressions } from '../suppressions.ts';
import { ANSWERED, type Step } from './chain.ts';

export function suppressedTrack(suppressions: Suppressions): Step {
  return function suppressedTrack(ctx) {
    const { environment, track, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, track.userId, receivedAt, 'track')) return;
    answerTrackAccepted(ctx, track.messageId);
    return ANSWERED;
  };
}

export function suppressedIdentify(suppressions: Suppressions): Step {
  return function suppressedIdentify(ctx) {
    const { environment, identify, receivedAt } = ctx.state;
    if (!suppressions.drops(environment, identify.userId, receivedAt, 'identify')) return;
    answerIdentifySaved(ctx, identify.messageId ?? randomUUID(), false);
    return ANSWERED;
  };
}
