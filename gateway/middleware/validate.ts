import type { Middleware } from 'koa';
import { checkTrack } from '../../common/validation/track.ts';
import { trackInvalid } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** Check 6b (Track): the first problem only, in the spec's field order. */
export const validateTrack: Middleware<IngestState> = async function validateTrack(ctx, next) {
  const result = checkTrack(ctx.state.body);
  if (!result.ok) throw trackInvalid(result.message);
  ctx.state.track = result.event;
  ctx.state.timestampMs = result.timestampMs;
  await next();
};
