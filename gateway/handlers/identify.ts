import type { Middleware } from 'koa';
import type { Db } from '../../common/db.ts';
import { applyIdentify } from '../../common/store/profiles.ts';
import { messageIdConflict } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** Saved before the answer: 200 applied or duplicate, 409 for a messageId reused differently. */
export function identify(deps: { db: Db }): Middleware<IngestState> {
  return async function identify(ctx) {
    const { environment, identify: input, receivedAt } = ctx.state;
    const result = await applyIdentify(deps.db, environment, input, receivedAt);
    if (result.kind === 'conflict') throw messageIdConflict(result.messageId);
    ctx.body = { success: true, messageId: result.messageId, duplicate: result.kind === 'duplicate' };
  };
}
