import type { RouterMiddleware } from '@koa/router';
import { isValidPathValue } from '../../environments/org-slug.ts';
import { invalidOrgSlug } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** Check 2: the `{org_slug}` path value's format. */
export const orgSlug: RouterMiddleware<IngestState> = function orgSlug(ctx, next) {
  const value = ctx.params.orgSlug ?? '';
  if (!isValidPathValue(value)) throw invalidOrgSlug();
  ctx.state.pathValue = value;
  return next();
};
