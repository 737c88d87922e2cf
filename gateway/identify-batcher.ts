// Identify group commit (common/group-batch.ts): the calls that arrive together are applied in
// one transaction (common/store/identify-batch.ts); each is answered with its own verdict once
// that transaction committed, or with its own error.
import type pg from 'pg';
import type { JsonWork } from '../common/json-pool.ts';
import { createGroupBatch, type GroupBatch, type GroupBatchOptions } from '../common/group-batch.ts';
import { applyIdentifyBatch } from '../common/store/identify-batch.ts';
import { createOutboxNotify } from '../common/store/outbox.ts';
import { userRef, type IdentifyCall, type Verdict } from '../common/store/identify-plan.ts';
import { ProfileCache } from '../common/store/profile-cache.ts';

export type IdentifyBatcher = GroupBatch<IdentifyCall, Verdict>;

/** `json`: where a large batch's rules run (off the event loop); `cacheMb`: the profile cache's size (0: none). */
export function createIdentifyBatcher(pool: pg.Pool, json: JsonWork, options: GroupBatchOptions & { cacheMb: number }): IdentifyBatcher {
  const notify = createOutboxNotify(pool);
  // Characters of text, about bytes for the ASCII most traits are.
  const cache = options.cacheMb > 0 ? new ProfileCache(options.cacheMb * 1_048_576) : undefined;
  // One user's calls never run in two batches at once: a later one waits for the batch holding the earlier (arrival order).
  return createGroupBatch((calls: IdentifyCall[]) => applyIdentifyBatch(pool, calls, { json, notify, cache }), { ...options, keyOf: userRef });
}
