import { answerProfile } from '../answers.ts';
import { profileNotFound } from '../errors.ts';
import type { ProfileReader } from '../../profiles/profile-reader.ts';
import type { Step } from '../checks/chain.ts';

/** The profile of a user ID (URL-decoded as UTF-8, looked up trimmed). */
export function profiles(deps: { profileReader: ProfileReader }): Step {
  return async function profiles(ctx) {
    const userId = userIdOf(ctx.params.userId, ctx.path);
    // Not UTF-8 once decoded (`%FF`, `%ED%A0%80`): no user ID is, so no profile has it.
    if (userId === null) throw profileNotFound();
    const profile = await deps.profileReader.add({ envId: ctx.state.environment.id, userId });
    if (!profile) throw profileNotFound();
    // The stored traits are JSON text already: written into the answer as they are, not parsed
    // and serialized again (a profile of many traits cost most of the request in both).
    answerProfile(
      ctx,
      `{"org_slug":${JSON.stringify(ctx.state.pathValue)},"user_id":${JSON.stringify(userId)},` +
        `"profile_id":${JSON.stringify(profile.profileId)},"updated_at":${profile.updatedAt},"fields":${profile.fieldsJson}}`,
    );
  };
}

/**
 * The router decodes the segment, but keeps one it cannot decode as it was sent: `%FF` would read
 * as the user ID "%FF", whose URL is `%25FF`, and answer another user's profile. The path's last
 * segment (the route's {user_id}, which holds no `/`) is decoded again only when it has a `%`.
 */
function userIdOf(routed: string, path: string): string | null {
  const segment = path.slice(path.lastIndexOf('/') + 1);
  if (!segment.includes('%')) return routed;
  try {
    return decodeURIComponent(segment);
  } catch {
    return null;
  }
}
