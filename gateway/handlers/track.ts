import type { QueuedEvent } from '../../events/jobs.ts';
import type { EventBatcher } from '../event-batcher.ts';
import { answerTrackAccepted } from '../answers.ts';
import { eventStorageUnavailable } from '../errors.ts';
import type { Step } from '../checks/chain.ts';

/** 202 only once the event's batch job is stored in Redis (group-committed with its neighbours); otherwise 503. */
export function track(deps: { batcher: EventBatcher }): Step {
  return function track(ctx) {
    const { environment, track: event, receivedAt, timestampMs, storedPayload } = ctx.state;
    const queued: QueuedEvent = { environmentId: environment.id, messageId: event.messageId, receivedAt, timestampMs, payload: storedPayload };
    return deps.batcher.add(queued).then(
      () => answerTrackAccepted(ctx, event.messageId),
      // A timed-out batch may still land later; the client's retry with the same messageId is then a duplicate.
      () => {
        throw eventStorageUnavailable();
      },
    );
  };
}
