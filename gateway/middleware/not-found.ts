import type { Middleware } from 'koa';
import { NOT_FOUND_TEXT } from '../errors.ts';

/** Anything no route matched (unknown path, trailing slash, other method, OPTIONS). */
export const notFound: Middleware = async function notFound(ctx) {
  ctx.status = 404;
  ctx.type = 'text/plain; charset=utf-8';
  ctx.body = NOT_FOUND_TEXT;
};

/**
 * @koa/router answers HEAD on every GET route (it adds HEAD to GET layers); the spec's GET
 * endpoint matches GET only, so HEAD is "a different method": the plain-text 404.
 */
export const getOnly: Middleware = async function getOnly(ctx, next) {
  if (ctx.method === 'HEAD') return notFound(ctx, next);
  await next();
};
