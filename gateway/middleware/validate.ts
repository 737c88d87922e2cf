import type { Middleware } from 'koa';
import { JsonText } from '../../platform/json-text.ts';
import type { JsonWork } from '../../platform/json-pool.ts';
import { decodeTrack } from '../../events/track.ts';
import { decodeIdentify, notJsonIssues } from '../../identify/validation.ts';
import { identifyInvalid, invalidJson, timestampTooFarAhead, trackInvalid, trackTooLarge } from '../errors.ts';
import type { IngestState } from '../state.ts';

/**
 * Check 6 (Track), in order: JSON, the size of the event as stored (413: the payload travels as
 * a string inside the job's JSON, so each quote and backslash counts twice), then the first
 * problem in the spec's field order. Off the event loop for a large body.
 */
export function validateTrack(json: JsonWork): Middleware<IngestState> {
  return async function validateTrack(ctx, next) {
    const result = await json.run(decodeTrack, ctx.state.rawBody);
    if (result.kind === 'notJson') throw invalidJson();
    if (result.kind === 'tooLarge') throw trackTooLarge();
    if (result.kind === 'invalid') throw trackInvalid(result.message);
    ctx.state.track = result.track;
    ctx.state.timestampMs = result.timestampMs;
    ctx.state.storedPayload = result.storedPayload;
    await next();
  };
}

/** Check 6 (Identify): JSON, then every problem at once; a timestamp too far ahead has its own answer. */
export function validateIdentify(json: JsonWork): Middleware<IngestState> {
  return async function validateIdentify(ctx, next) {
    const result = await json.run(decodeIdentify, ctx.state.rawBody, ctx.state.receivedAt);
    if (result.kind === 'notJson') throw identifyInvalid(notJsonIssues());
    if (result.kind === 'invalid') throw identifyInvalid(new JsonText(result.issues), result.first);
    if (result.kind === 'tooFarAhead') throw timestampTooFarAhead();
    ctx.state.identify = result.input;
    await next();
  };
}
