import { JsonText } from '../../platform/json-text.ts';
import type { JsonWork } from '../../platform/json-pool.ts';
import { decodeTrack, type TrackDecoded } from '../../events/track.ts';
import { decodeIdentify, notJsonIssues, type IdentifyDecoded } from '../../identify/validation.ts';
import { identifyInvalid, invalidJson, timestampTooFarAhead, trackInvalid, trackTooLarge } from '../errors.ts';
import type { IngestContext, Step } from './chain.ts';

/**
 * Check 6 (Track), in order: JSON, the size of the event as stored (413: the payload travels as
 * a string inside the job's JSON, so each quote and backslash counts twice), then the first
 * problem in the spec's field order. Off the event loop for a large body.
 */
export function validateTrack(json: JsonWork): Step {
  return function validateTrack(ctx) {
    const raw = ctx.state.rawBody;
    if (json.inline(raw)) return acceptTrack(ctx, decodeTrack(raw));
    return json.run(decodeTrack, raw).then((result) => acceptTrack(ctx, result));
  };
}

function acceptTrack(ctx: IngestContext, result: TrackDecoded): void {
  if (result.kind === 'notJson') throw invalidJson();
  if (result.kind === 'tooLarge') throw trackTooLarge();
  if (result.kind === 'invalid') throw trackInvalid(result.message);
  ctx.state.track = result.track;
  ctx.state.timestampMs = result.timestampMs;
  ctx.state.storedPayload = result.storedPayload;
}

/** Check 6 (Identify): JSON, then every problem at once; a timestamp too far ahead has its own answer. */
export function validateIdentify(json: JsonWork): Step {
  return function validateIdentify(ctx) {
    const { rawBody, receivedAt } = ctx.state;
    if (json.inline(rawBody)) return acceptIdentify(ctx, decodeIdentify(rawBody, receivedAt));
    return json.run(decodeIdentify, rawBody, receivedAt).then((result) => acceptIdentify(ctx, result));
  };
}

function acceptIdentify(ctx: IngestContext, result: IdentifyDecoded): void {
  if (result.kind === 'notJson') throw identifyInvalid(notJsonIssues());
  if (result.kind === 'invalid') throw identifyInvalid(new JsonText(result.issues), result.first);
  if (result.kind === 'tooFarAhead') throw timestampTooFarAhead();
  ctx.state.identify = result.input;
}
