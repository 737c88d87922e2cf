import type { Context, Middleware } from 'koa';
import { ANSWERED, type StepResult } from '../checks/chain.ts';
import { NOT_FOUND_TEXT } from '../errors.ts';

/** Anything no route matched (unknown path, trailing slash, other method, OPTIONS). */
export const notFound: Middleware = async function notFound(ctx) {
  answerNotFound(ctx);
};

function answerNotFound(ctx: Context): void {
  ctx.status = 404;
  ctx.type = 'text/plain; charset=utf-8';
  ctx.body = NOT_FOUND_TEXT;
}

/**
 * @koa/router answers HEAD on every GET route (it adds HEAD to GET layers); the spec's GET
 * endpoint matches GET only, so HEAD is "a different method": the plain-text 404.
 */
export function getOnly(ctx: Context): StepResult {
  if (ctx.method !== 'HEAD') return;
  answerNotFound(ctx);
  return ANSWERED;
}
