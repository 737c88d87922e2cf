import type { Middleware } from 'koa';
import { storedSize, TRACK_EVENT_LIMIT_BYTES } from '../../common/domain/event-size.ts';
import { storedTrackPayload } from '../../common/domain/track-payload.ts';
import { trackTooLarge } from '../errors.ts';
import type { IngestState } from '../state.ts';

/**
 * Check 6 (Track): the size of the event as stored, not of the raw body. The payload
 * travels as a string inside the job's JSON, so each quote and backslash counts twice.
 */
export const trackSize: Middleware<IngestState> = async function trackSize(ctx, next) {
  const payload = storedTrackPayload(ctx.state.body);
  if (storedSize(payload) > TRACK_EVENT_LIMIT_BYTES) throw trackTooLarge();
  ctx.state.storedPayload = payload;
  await next();
};
