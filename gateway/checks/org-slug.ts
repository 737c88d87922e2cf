import { isValidPathValue } from '../../environments/org-slug.ts';
import { invalidOrgSlug } from '../errors.ts';
import type { IngestContext } from './chain.ts';

/** Check 2: the `{org_slug}` path value's format. */
export function orgSlug(ctx: IngestContext): void {
  const value = ctx.params.orgSlug ?? '';
  if (!isValidPathValue(value)) throw invalidOrgSlug();
  ctx.state.pathValue = value;
}
