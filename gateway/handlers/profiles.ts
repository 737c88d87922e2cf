import type { RouterMiddleware } from '@koa/router';
import type { Db } from '../../common/db.ts';
import { findProfile } from '../../common/store/profiles.ts';
import { profileNotFound } from '../errors.ts';
import type { IngestState } from '../state.ts';

/** The profile of a user ID (URL-decoded by the router, looked up trimmed). */
export function profiles(deps: { db: Db }): RouterMiddleware<IngestState> {
  return async function profiles(ctx) {
    const userId = ctx.params.userId;
    const profile = await findProfile(deps.db, ctx.state.environment.id, userId);
    if (!profile) throw profileNotFound();
    ctx.body = {
      org_slug: ctx.state.pathValue,
      user_id: userId,
      profile_id: profile.profileId,
      updated_at: profile.updatedAt,
      fields: profile.fields,
    };
  };
}
