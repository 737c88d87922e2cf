import type { Middleware } from 'koa';
import type { Queue } from 'bullmq';
import { jobIdFor, type EventJob } from '../../common/queues.ts';
import { eventStorageUnavailable } from '../errors.ts';
import type { IngestState } from '../state.ts';

export interface TrackDeps {
  eventsQueue: Queue<EventJob>;
  enqueueTimeoutMs: number;
}

/** 202 only once the job is stored in Redis; a failed or slow enqueue is a 503. */
export function track(deps: TrackDeps): Middleware<IngestState> {
  return async function track(ctx) {
    const { environment, track: event, receivedAt, timestampMs, storedPayload } = ctx.state;
    const job: EventJob = { environmentId: environment.id, messageId: event.messageId, receivedAt, timestampMs, payload: storedPayload };
    try {
      await within(deps.eventsQueue.add('track', job, { jobId: jobIdFor(environment.id, event.messageId) }), deps.enqueueTimeoutMs);
    } catch {
      // A timed-out add may still land later; the client's retry with the same messageId is then a duplicate.
      throw eventStorageUnavailable();
    }
    ctx.status = 202;
    ctx.body = { message_id: event.messageId, status: 'accepted' };
  };
}

function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`enqueue took longer than ${ms} ms`)), ms);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
