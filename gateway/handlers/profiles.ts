import type { RouterMiddleware } from '@koa/router';
import { profileNotFound } from '../errors.ts';
import type { ProfileReader } from '../profile-reader.ts';
import type { IngestState } from '../state.ts';

/** The profile of a user ID (URL-decoded by the router, looked up trimmed). */
export function profiles(deps: { profileReader: ProfileReader }): RouterMiddleware<IngestState> {
  return async function profiles(ctx) {
    const userId = ctx.params.userId;
    const profile = await deps.profileReader.add({ envId: ctx.state.environment.id, userId });
    if (!profile) throw profileNotFound();
    // The stored traits are JSON text already: written into the answer as they are, not parsed
    // and serialized again (a profile of many traits cost most of the request in both).
    ctx.type = 'application/json';
    ctx.body =
      `{"org_slug":${JSON.stringify(ctx.state.pathValue)},"user_id":${JSON.stringify(userId)},` +
      `"profile_id":${JSON.stringify(profile.profileId)},"updated_at":${profile.updatedAt},"fields":${profile.fieldsJson}}`;
  };
}
