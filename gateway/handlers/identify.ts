import type { Middleware } from 'koa';
import { toIdentifyCall } from '../../common/store/identify-plan.ts';
import { messageIdConflict } from '../errors.ts';
import type { IdentifyBatcher } from '../identify-batcher.ts';
import type { IngestState } from '../state.ts';

/** Saved before the answer (its batch committed): 200 applied or duplicate, 409 for a messageId reused differently. */
export function identify(deps: { identifyBatcher: IdentifyBatcher }): Middleware<IngestState> {
  return async function identify(ctx) {
    const { environment, identify: input, receivedAt } = ctx.state;
    const call = toIdentifyCall(environment, input, receivedAt);
    const verdict = await deps.identifyBatcher.add(call);
    if (verdict === 'conflict') throw messageIdConflict(call.messageId);
    ctx.body = { success: true, messageId: call.messageId, duplicate: verdict === 'duplicate' };
  };
}
