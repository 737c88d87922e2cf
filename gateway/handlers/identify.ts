// Identify at the gateway: the calls that arrive together are applied in one transaction
// (group commit, platform/group-batch.ts; the transaction: identify/identify-batch.ts), and
// each is answered with its own verdict once that transaction committed, or with its own error.
import type pg from 'pg';
import { createGroupBatch, type GroupBatch, type GroupBatchOptions } from '../../platform/group-batch.ts';
import type { JsonWork } from '../../platform/json-pool.ts';
import { applyIdentifyBatch, type BatchOptions } from '../../identify/identify-batch.ts';
import { toIdentifyCall, userRef, type IdentifyCall, type Verdict } from '../../identify/identify-plan.ts';
import { createOutboxNotify } from '../../identify/outbox.ts';
import { ProfileCache } from '../../identify/profile-cache.ts';
import { answerIdentifySaved } from '../answers.ts';
import { messageIdConflict } from '../errors.ts';
import type { Step } from '../checks/chain.ts';

export type IdentifyBatcher = GroupBatch<IdentifyCall, Verdict>;

/** `json`: where a large batch's rules run (off the event loop); `cacheMb`: the profile cache's size (0: none). */
export function createIdentifyBatcher(
  pool: pg.Pool,
  json: JsonWork,
  options: GroupBatchOptions & Pick<BatchOptions, 'addressHistoryDays' | 'onCommitted' | 'onDropped'> & { cacheMb: number },
): IdentifyBatcher {
  const { onCommitted, onDropped, addressHistoryDays } = options;
  const cache = options.cacheMb > 0 ? new ProfileCache(options.cacheMb * 1_048_576) : undefined;
  const batch: BatchOptions = { json, notify: createOutboxNotify(pool), cache, onCommitted, onDropped, addressHistoryDays };
  // One user's calls never run in two batches at once: a later one waits for the batch holding the earlier (arrival order).
  // A call whose traits are planned off the event loop (seconds for a 4 MB body) is applied on its own: the calls that
  // arrived with it, other organizations' among them, would otherwise wait for it in its transaction.
  const alone = (call: IdentifyCall) => !json.inline(call.input.traitsText);
  return createGroupBatch((calls: IdentifyCall[]) => applyIdentifyBatch(pool, calls, batch), { ...options, keyOf: userRef, alone });
}

/** Saved before the answer (its batch committed): 200 applied or duplicate, 409 for a messageId reused differently. */
export function identify(deps: { identifyBatcher: IdentifyBatcher }): Step {
  return async function identify(ctx) {
    const { environment, identify: input, receivedAt } = ctx.state;
    const call = toIdentifyCall(environment, input, receivedAt);
    const verdict = await deps.identifyBatcher.add(call);
    if (verdict === 'conflict') throw messageIdConflict(call.messageId);
    answerIdentifySaved(ctx, call.messageId, verdict === 'duplicate');
  };
}
