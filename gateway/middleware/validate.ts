import type { Middleware } from 'koa';
import { checkIdentify } from '../../common/validation/identify.ts';
import { checkTrack } from '../../common/validation/track.ts';
import { identifyInvalid, timestampTooFarAhead, trackInvalid } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** Check 6b (Track): the first problem only, in the spec's field order. */
export const validateTrack: Middleware<IngestState> = async function validateTrack(ctx, next) {
  const result = checkTrack(ctx.state.body);
  if (!result.ok) throw trackInvalid(result.message);
  ctx.state.track = result.event;
  ctx.state.timestampMs = result.timestampMs;
  await next();
};

/** Check 6b (Identify): every problem at once; a timestamp too far ahead has its own answer. */
export const validateIdentify: Middleware<IngestState> = async function validateIdentify(ctx, next) {
  const result = checkIdentify(ctx.state.body, ctx.state.receivedAt);
  if (!result.ok) throw 'issues' in result ? identifyInvalid(result.issues) : timestampTooFarAhead();
  ctx.state.identify = result.input;
  await next();
};
