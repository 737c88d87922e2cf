// The Identify calls a tombstone or a suppression drops: answered as applied and stored nowhere.
// Read inside the batch's transaction (identify-write.ts), so a call cannot slip past an erasure
// or a suppression that committed before it.
import { dropReason, type DropReason } from '../privacy/rules.ts';
import { privacyStates, type PrivacyRow } from '../privacy/suppression.ts';
import type { IdentifyCall } from './identify-plan.ts';

export interface DroppedCall {
  call: IdentifyCall;
  reason: DropReason;
}

/** The Identify calls of a batch that a tombstone or a suppression drops. */
export function droppedCalls(calls: readonly IdentifyCall[], rows: readonly PrivacyRow[]): DroppedCall[] {
  if (!rows.length) return [];
  const states = privacyStates(rows);
  const out: DroppedCall[] = [];
  for (const call of calls) {
    const reason = dropReason(states.get(`${call.envId}:${call.userHashHex}`), call.receivedAt);
    if (reason) out.push({ call, reason });
  }
  return out;
}

/** Thrown inside an Identify batch's transaction when some of its calls are dropped: the batch is rolled back and run without them. */
export class CallsDropped extends Error {
  override name = 'CallsDropped';
  constructor(readonly dropped: DroppedCall[]) {
    super(`${dropped.length} calls dropped by an erasure or a suppression`);
  }
}
