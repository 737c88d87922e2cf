import { Stream } from 'node:stream';
import type { ParameterizedContext } from 'koa';
import { stringifyJson } from '../../platform/json-text.ts';
import type { Logger } from '../../platform/logger.ts';
import { ApiError, internal } from '../errors.ts';
import { routeName, type IngestState } from '../state.ts';

type Context = ParameterizedContext<IngestState>;

/**
 * The one place an error becomes a response, called by the outermost middleware (request-log.ts)
 * once the rest have thrown. Nothing of an unexpected error reaches the caller.
 */
export function answerError(ctx: Context, err: unknown, log: Logger): void {
  const known = err instanceof ApiError ? err : null;
  if (!known) {
    log.error({ requestId: ctx.state.requestId, route: routeName(ctx), err }, 'unexpected error');
  }
  const response = known ?? internal();
  if (response.status < 500) ctx.state.refusal = refusalOf(response);
  ctx.status = response.status;
  if (response.headers) ctx.set(response.headers);
  // Through stringifyJson too: an Identify 400's issues may arrive as JsonText.
  ctx.type = 'json';
  ctx.body = stringifyJson(response.body);
}

/**
 * A handler's JSON body, serialized here rather than by Koa after the middleware: a value that
 * cannot be written fails into the spec's JSON 500 (thrown to answerError), never Koa's plain
 * text; and with stringifyJson, caller data nested deeper than JSON.stringify recurses is written whole.
 */
export function serializeBody(ctx: Context): void {
  if (isJsonValue(ctx.body)) ctx.body = stringifyJson(ctx.body);
}

/** The check that refused a request, for its log line. */
export function refusalOf(error: ApiError): string {
  return error.refusal ?? String(error.body.error ?? `HTTP ${error.status}`);
}

/** What Koa would send as JSON: not a string, Buffer or stream. */
function isJsonValue(body: unknown): body is object {
  return typeof body === 'object' && body !== null && !Buffer.isBuffer(body) && !(body instanceof Stream);
}
