import type { Middleware } from 'koa';
import { NOT_FOUND_TEXT } from '../errors.ts';

/** Anything no route matched (unknown path, trailing slash, other method, OPTIONS). */
export const notFound: Middleware = async function notFound(ctx) {
  ctx.status = 404;
  ctx.type = 'text/plain; charset=utf-8';
  ctx.body = NOT_FOUND_TEXT;
};
